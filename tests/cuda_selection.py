"""pytest plugin for scripts/gpu-check.sh: keeps only the tests marked `gpu`.

A test that needs a CUDA device carries `@pytest.mark.gpu` beside the `skipif` that skips it,
with its reason, where there is none (tests/conftest.py refuses a `gpu` test without one).
Loaded with `-p tests.cuda_selection`.
"""

from __future__ import annotations

import pytest


def needs_gpu(item: pytest.Item) -> bool:
    return item.get_closest_marker("gpu") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept = [item for item in items if needs_gpu(item)]
    dropped = [item for item in items if not needs_gpu(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept
