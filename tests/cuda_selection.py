"""pytest plugin for scripts/gpu-check.sh: keeps only the tests that need a GPU.

A test needs a GPU when one of its skipif marks gives a reason that names CUDA, a GPU or NCCL
("no CUDA device", "needs a CUDA device", "NCCL needs two CUDA GPUs on this host"): the suite's
own convention for tests that skip without one. Loaded with `-p tests.cuda_selection`.
"""

from __future__ import annotations

import re

import pytest

GPU_REASON = re.compile(r"\b(cuda|gpus?|nccl)\b", re.IGNORECASE)


def needs_gpu(item: pytest.Item) -> bool:
    return any(
        GPU_REASON.search(str(mark.kwargs.get("reason", "")))
        for mark in item.iter_markers("skipif")
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept = [item for item in items if needs_gpu(item)]
    dropped = [item for item in items if not needs_gpu(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept
