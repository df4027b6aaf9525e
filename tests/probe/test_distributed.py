"""The distributed probe on CPU: two ranks under torchrun with gloo, real torch, real DDP and
FSDP2. Each launch costs seconds (two torch imports and a rendezvous), so the cases are few
and the models tiny."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from torchdoctor.probe.client import ProbeLimits
from torchdoctor.probe.distributed import (
    RANK_WORKER_PATH,
    DistributedOptions,
    run_distributed_probe,
    visible_gpu_count,
)
from torchdoctor.probe.distributed_schema import DistributedInfo, StrategyResult
from torchdoctor.probe.distributed_summary import JobOutcome, estimate, summarize
from torchdoctor.probe.schema import ProbeReport

from ..conftest import ROOT
from .conftest import FIXTURES, PYTHON, marked_line

MODELS = FIXTURES / "distributed_models.py"


def run(
    target: str, *, timeout_s: float = 90.0, nproc: int = 2, **settings: object
) -> DistributedInfo:
    chosen: dict[str, object] = {"iters": 2, "warmup": 1, "threads": 1, "backend": "gloo"}
    chosen.update(settings)
    options = DistributedOptions(str(MODELS), target, nproc=nproc, **chosen)  # type: ignore[arg-type]
    limits = ProbeLimits(timeout_s=timeout_s)
    return asyncio.run(run_distributed_probe(PYTHON, options, limits=limits))


def ranks_left(info: DistributedInfo | None, target: str) -> list[int]:
    """Live processes (from /proc) that are ranks of this job, by pid or by command line."""
    pids = {status.pid for status in info.ranks if status.pid} if info is not None else set()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if state == "Z":
            continue
        ours = str(RANK_WORKER_PATH).encode() in command and target.encode() in command
        if ours or (int(entry) in pids and str(RANK_WORKER_PATH).encode() in command):
            found.append(int(entry))
    return found


def strategy(info: DistributedInfo, name: str) -> StrategyResult:
    return next(result for result in info.strategies if result.strategy == name)


@pytest.mark.parametrize(
    ("target", "spec"), [("TinyTransformer", "(4, 16):int64"), ("TinyCNN", "(2, 3, 16, 16)")]
)
def test_ddp_and_fsdp_measured_per_rank(target: str, spec: str) -> None:
    info = run(target, strategy="both", input_spec=spec)

    assert info.error is None and all(s.status == "ok" for s in info.ranks), info.ranks
    ddp, fsdp = strategy(info, "ddp"), strategy(info, "fsdp")
    for result in (ddp, fsdp):
        assert result.ok and [r.rank for r in result.ranks] == [0, 1]
        for rank in result.ranks:
            assert rank.step_median_ms > 0 and rank.iterations == 2
            assert rank.peak_memory_bytes >= rank.param_bytes > 0
            assert rank.collectives and rank.bytes_per_step > 0
    # DDP holds a full float32 replica; FSDP2 about half of it on each of two ranks
    assert ddp.ranks[0].param_bytes == 4 * ddp.total_params == ddp.full_param_bytes
    for rank in fsdp.ranks:
        assert abs(rank.param_bytes - ddp.ranks[0].param_bytes / 2) <= 0.05 * rank.param_bytes
        assert rank.grad_bytes == rank.param_bytes
        assert rank.optimizer_state_bytes < ddp.ranks[0].optimizer_state_bytes
    assert {c.kind for c in ddp.ranks[0].collectives} >= {"all_reduce"}
    assert {c.kind for c in fsdp.ranks[0].collectives} >= {"all_gather"}
    advice = info.recommendation
    assert advice is not None and advice.strategy in ("ddp", "fsdp")
    assert "measured with 2 ranks" in advice.reason and "estimate" in advice.formula
    assert {(row.ranks, row.strategy) for row in advice.estimates} >= {(8, "ddp"), (8, "fsdp")}


def test_unused_parameter_is_td601_at_its_declaration_through_the_cli() -> None:
    command = [
        sys.executable, "-m", "torchdoctor", "probe", f"{MODELS}::UnusedHead",
        "--nproc", "2", "--strategy", "ddp", "--backend", "gloo", "--iters", "2",
        "--threads", "1", "--json",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=ROOT)

    assert done.returncode == 1, done.stderr[-2000:]
    payload = json.loads(done.stdout)
    report = ProbeReport.from_dict(payload["report"])
    assert report.schema == 2 and report.distributed is not None
    (finding,) = [f for f in report.distributed.findings if f.code == "TD601"]
    assert finding.line == marked_line(MODELS, "expect: unused")
    assert finding.detail == "aux_head.weight, aux_head.bias"
    assert finding.ranks == [0, 1]
    assert strategy(report.distributed, "ddp").find_unused_parameters
    assert "measured with 2 ranks" in report.recommendation.reason


def test_rank_skipping_an_all_reduce_is_reported_within_the_timeout() -> None:
    info = run("RankSkipsAllReduce", strategy="ddp", collective_timeout_s=4.0, timeout_s=60)

    (finding,) = [f for f in info.findings if f.kind == "collective_divergence"]
    assert finding.severity == "error" and finding.ranks == [0, 1]
    assert finding.line == marked_line(MODELS, "expect: divergent")
    rank0 = info.ranks[0]
    assert rank0.error_kind == "collective" and rank0.stack[0].line == finding.line
    assert info.seconds < 60
    assert ranks_left(info, "RankSkipsAllReduce") == []


def test_probe_timeout_kills_every_rank() -> None:
    # the collective time-out is far away: the probe's own time-out has to end the job
    info = run("RankOneStalls", strategy="ddp", collective_timeout_s=600.0, timeout_s=15.0)

    assert info.error == "timeout"
    assert [status.status for status in info.ranks] == ["timeout", "timeout"]
    assert ranks_left(info, "RankOneStalls") == []


def test_cancelling_a_stuck_job_gives_each_rank_its_stack_and_kills_every_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "rank-1-stalled"
    monkeypatch.setenv("STALL_MARKER", str(marker))  # the ranks inherit it

    async def cancel_once_stalled() -> DistributedInfo:
        cancel = asyncio.Event()
        options = DistributedOptions(
            str(MODELS), "RankOneStalls", nproc=2, strategy="ddp", backend="gloo",
            collective_timeout_s=600.0, threads=1,
        )

        async def watch() -> None:
            while not marker.exists():
                await asyncio.sleep(0.1)
            cancel.set()

        watcher = asyncio.ensure_future(watch())
        try:
            return await run_distributed_probe(
                PYTHON, options, limits=ProbeLimits(timeout_s=120), cancel=cancel
            )
        finally:
            watcher.cancel()

    info = asyncio.run(cancel_once_stalled())

    assert info.error == "cancelled"
    stalled = info.ranks[1]
    assert stalled.stack and stalled.stack[0].line == marked_line(MODELS, "expect: stalls")
    assert ranks_left(info, "RankOneStalls") == []


def test_ranks_die_with_the_process_that_launched_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server itself killed (SIGKILL, no clean-up runs): the launcher dies with it and
    every rank with the launcher (parent-death signals), so nothing is orphaned."""
    marker = tmp_path / "rank-1-stalled"
    monkeypatch.setenv("STALL_MARKER", str(marker))
    script = (
        "import asyncio, sys\n"
        f"sys.path.insert(0, {str(ROOT / 'server')!r})\n"
        "from torchdoctor.probe.distributed import DistributedOptions, run_distributed_probe\n"
        f"options = DistributedOptions({str(MODELS)!r}, 'RankOneStalls', strategy='ddp',\n"
        "    backend='gloo', collective_timeout_s=600.0, threads=1)\n"
        f"asyncio.run(run_distributed_probe({PYTHON!r}, options))\n"
    )
    server = subprocess.Popen([PYTHON, "-c", script])
    try:
        for _ in range(1200):  # until rank 1 stalls (the ranks import torch first)
            if marker.exists() or server.poll() is not None:
                break
            time.sleep(0.1)
        assert marker.exists(), "rank 1 never reached its stall"
    finally:
        server.kill()
        server.wait()

    left = ranks_left(None, "RankOneStalls")
    for _ in range(100):  # SIGKILL from the parent-death signal is asynchronous
        if not left:
            break
        time.sleep(0.05)
        left = ranks_left(None, "RankOneStalls")
    assert left == []


@pytest.mark.gpu
@pytest.mark.skipif(visible_gpu_count() < 1, reason="NCCL needs a CUDA GPU on this host")
def test_nccl_ranks_measure_cuda_memory() -> None:
    ranks = min(visible_gpu_count(), 2)  # one rank per GPU
    info = run(
        "TinyTransformer", nproc=ranks, strategy="both", backend="nccl",
        input_spec="(4, 16):int64",
    )

    assert all(s.status == "ok" for s in info.ranks), info.ranks
    for result in info.strategies:
        assert all(rank.memory_method == "cuda_allocator" for rank in result.ranks)


def test_fsdp_estimate_shards_states_and_ring_comm_grows_with_ranks() -> None:
    measured = StrategyResult(
        strategy="fsdp", ok=True, ranks=[], total_params=0, full_param_bytes=0,
        step_ms=100.0, comm_share=0.2, peak_memory_bytes=1000, param_bytes=100,
        grad_bytes=100, optimizer_state_bytes=200, bytes_per_step=0,
        find_unused_parameters=False,
    )

    one_node = estimate(measured, measured_ranks=2, ranks=8, nodes=1)
    two_nodes = estimate(measured, measured_ranks=2, ranks=16, nodes=2)

    assert one_node is not None and two_nodes is not None
    # (1000 - 400) + 400 * 2 / 8
    assert one_node.memory_per_rank_bytes == 700
    # comm 20 ms * (7/8) / (1/2) = 35 ms against 80 ms of compute
    assert one_node.comm_share == pytest.approx(35 / 115)
    assert two_nodes.comm_share is not None and two_nodes.comm_share > one_node.comm_share


def _rank_record(rank: int, step_ms: float, shape: list[int]) -> dict[str, object]:
    run = {
        "strategy": "ddp", "ok": True,
        "step": {"iterations": 3, "warmup": 1, "median_ms": step_ms, "min_ms": step_ms,
                 "max_ms": step_ms, "iqr_ms": 0.0},
        "profiled_step_ms": step_ms, "collectives": [], "comm_ms": 0.0, "comm_share": 0.0,
        "bytes_per_step": 0, "peak_memory_bytes": 100, "memory_method": "profiler_allocations",
        "total_params": 4, "full_param_bytes": 16, "param_bytes": 16, "grad_bytes": 16,
        "optimizer_state_bytes": 32, "output_shapes": [shape], "find_unused_parameters": False,
        "unused_parameters": [],
    }
    return {"rank": rank, "world_size": 2, "device": "cpu", "runs": [run], "error": None}


def test_ranks_that_differ_in_time_and_output_shape_are_named() -> None:
    outcome = JobOutcome(nproc=2, backend="gloo", strategies=["ddp"], user_file=str(MODELS),
                         seconds=1.0)
    records = {0: _rank_record(0, 10.0, [8, 4]), 1: _rank_record(1, 30.0, [6, 4])}

    info = summarize(outcome, {}, records, {})

    (ddp,) = info.strategies
    assert ddp.step_ms == 30.0  # the job moves at its slowest rank's pace
    assert any(d.startswith("rank 1 is slowest: 30.0 ms") for d in ddp.differences)
    assert "rank 1 returns 6x4 while rank 0 returns 8x4" in ddp.differences
    assert [status.status for status in info.ranks] == ["ok", "ok"]
