"""The warm worker: torch stays imported between probes, the user's file does not."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from torchdoctor.probe.client import WorkerPool, process_group_alive
from torchdoctor.probe.schema import ProbeReport

from .conftest import PYTHON, LoopRunner, needs_torch, options, report_of

pytestmark = [needs_torch, pytest.mark.timeout(180)]

MODEL_TEMPLATE = '''
import torch
from torch import nn


class Resizable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, {width})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)
'''


def test_second_probe_is_warm_sees_file_edits_and_survives_a_dead_worker(
    loop_runner: LoopRunner, tmp_path: Path
) -> None:
    model = tmp_path / "resizable.py"
    model.write_text(MODEL_TEMPLATE.format(width=3))
    pool = WorkerPool()

    def probe() -> tuple[float, ProbeReport]:
        started = time.perf_counter()
        report = report_of(loop_runner.run(pool.probe(PYTHON, options(model, "Resizable"))))
        return time.perf_counter() - started, report

    try:
        cold, first = probe()
        pid = pool.pid(PYTHON)
        model.write_text(MODEL_TEMPLATE.format(width=7))
        warm, second = probe()
        assert pool.pid(PYTHON) == pid  # the same process: torch was not imported again
        assert warm < cold / 2, (cold, warm)
        assert (first.params.total, second.params.total) == (4 * 3 + 3, 4 * 7 + 7)

        assert pid is not None
        os.killpg(pid, signal.SIGKILL)  # dies while idle
        time.sleep(0.2)
        _, third = probe()
        assert third.params.total == 4 * 7 + 7
        assert pool.pid(PYTHON) not in (None, pid)
    finally:
        loop_runner.run(pool.close())


def test_each_interpreter_gets_its_own_worker(loop_runner: LoopRunner, tmp_path: Path) -> None:
    other = tmp_path / "python-link"
    other.symlink_to(PYTHON)  # as a venv's python is a link: a different interpreter path
    pool = WorkerPool(max_workers=1)
    try:
        first = loop_runner.run(pool.warm(PYTHON, wait=False))
        second = loop_runner.run(pool.warm(str(other), wait=False))
        assert first != second
        assert pool.pid(str(other)) == second
        assert pool.pid(PYTHON) is None  # the least recently used was closed to make room
        assert not process_group_alive(first)
    finally:
        loop_runner.run(pool.close())
    assert not process_group_alive(second)
