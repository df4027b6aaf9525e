"""Shared helpers for the probe tests: a real runner under this interpreter, real torch."""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from torchdoctor.probe.client import ProbeLimits, ProbeOptions, WorkerPool
from torchdoctor.probe.schema import ErrorEvent, FinalEvent, ProbeReport, ResultEvent

from ..conftest import ROOT

FIXTURES = Path(__file__).parent / "fixtures"
EXAMPLES = ROOT / "examples"
PYTHON = sys.executable
T = TypeVar("T")


def marked_line(path: Path, marker: str) -> int:
    """1-based line of the `# expect: <marker>` / `# error-here` comment in a fixture."""
    pattern = re.compile(rf"#\s*{re.escape(marker)}\b")
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if pattern.search(line):
            return number
    raise AssertionError(f"no '# {marker}' in {path}")


def marked_lines(path: Path, marker: str) -> set[int]:
    pattern = re.compile(rf"#\s*{re.escape(marker)}\b")
    lines = path.read_text(encoding="utf-8").splitlines()
    return {number for number, line in enumerate(lines, start=1) if pattern.search(line)}


def options(path: Path, target: str, **extra: Any) -> ProbeOptions:
    """Small and quick: 2 timed iterations, 1 warm-up, one torch thread."""
    settings: dict[str, Any] = {"iters": 2, "warmup": 1, "threads": 1, "timing_budget_s": 1.0}
    settings.update(extra)
    return ProbeOptions(str(path), target, **settings)


def report_of(final: FinalEvent) -> ProbeReport:
    assert isinstance(final, ResultEvent), f"expected a result, got {final}"
    return final.report


def error_of(final: FinalEvent) -> ErrorEvent:
    assert isinstance(final, ErrorEvent), "expected an error event, got a result"
    return final


class LoopRunner:
    """Runs coroutines on one event loop that lives as long as the warm pool."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 120.0) -> T:
        return self.loop.run_until_complete(asyncio.wait_for(coroutine, timeout))

    def close(self) -> None:
        self.loop.close()


class WarmProbe:
    """A warm worker pool plus the loop it runs on, shared by a test module."""

    def __init__(self, limits: ProbeLimits | None = None) -> None:
        self.runner = LoopRunner()
        self.pool = WorkerPool(limits or ProbeLimits(timeout_s=90))

    def probe(self, path: Path, target: str, **extra: Any) -> FinalEvent:
        return self.runner.run(self.pool.probe(PYTHON, options(path, target, **extra)))

    def close(self) -> None:
        self.runner.run(self.pool.close())
        self.runner.close()


@pytest.fixture(scope="module")
def warm() -> Iterator[WarmProbe]:
    probe = WarmProbe()
    probe.runner.run(probe.pool.warm(PYTHON))
    yield probe
    probe.close()


@pytest.fixture
def loop_runner() -> Iterator[LoopRunner]:
    runner = LoopRunner()
    yield runner
    runner.close()


def copy_fixture(name: str, directory: Path, as_name: str | None = None) -> Path:
    target = directory / (as_name or name)
    shutil.copy(FIXTURES / name, target)
    return target


needs_torch = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("torch") is None,
    reason="probe tests run the real runner with torch (pip install -e '.[probe]')",
)


def plain_flop_counter() -> Any:
    """torch's FlopCounterMode with torch's own attention formula applied to the attention
    kernel it has none for (the CPU one), as the probe counts: without it attention counts
    0 FLOPs on the CPU. test_attention_flops.py checks the probe's attention counts by hand."""
    import torch
    from torch.utils import flop_counter

    def forward(query: Any, key: Any, value: Any, *_: Any, **__: Any) -> int:
        return int(flop_counter.sdpa_flop_count(query, key, value))

    def backward(grad_out: Any, query: Any, key: Any, value: Any, *_: Any, **__: Any) -> int:
        return int(flop_counter.sdpa_backward_flop_count(grad_out, query, key, value))

    aten = torch.ops.aten
    return flop_counter.FlopCounterMode(
        display=False,
        custom_mapping={
            aten._scaled_dot_product_flash_attention_for_cpu: forward,
            aten._scaled_dot_product_flash_attention_for_cpu_backward: backward,
        },
    )
