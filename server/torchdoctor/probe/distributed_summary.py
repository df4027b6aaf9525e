"""From the files the ranks wrote to the report's `distributed` section: pure functions.

Input: each rank's start record, result record and faulthandler dumps (see rank_worker.py),
and how the job ended. Output: a `DistributedInfo` with per-strategy results, each rank's
status and stack, findings (TD601, collective divergence), the ranks that differ, and the
DDP/FSDP recommendation with its extrapolation (documented in REPORT.md, labelled an
estimate).
"""

from __future__ import annotations

import os
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from .distributed_schema import (
    CollectiveRow,
    DistributedFinding,
    DistributedInfo,
    DistributedRecommendation,
    Extrapolation,
    RankRun,
    RankStatus,
    StackFrame,
    StrategyResult,
)

LAUNCHER = "torch.distributed.run"
SKEW_RATIO = 1.25
"""A rank whose median step is this much slower than the fastest rank's is named."""
INTER_NODE_SLOWDOWN = 8.0
"""Assumed ratio of intra-node to inter-node bandwidth (NVLink-class links against a
100-400 Gb/s network) for the multi-node estimate."""
DEVICE_MEMORY_SHARE = 0.8
"""DDP fits while its per-rank peak stays under this share of a GPU's memory."""
ESTIMATE_SHAPES = ((8, 1), (16, 2))
"""(ranks, nodes) the recommendation extrapolates to: one 8-GPU node, two of them."""
FORMULA = (
    "estimate, not a measurement: memory per rank under DDP = the measured peak (a full "
    "replica on every rank); under FSDP = (peak - S) + S * n / N, S being the parameter + "
    "gradient + optimizer-state bytes a rank held at the n measured ranks; communication "
    "time = measured * ((N - 1) / N) / ((n - 1) / n) (ring collectives), times "
    f"{INTER_NODE_SLOWDOWN:g} across nodes (assumed intra/inter-node bandwidth ratio); "
    "compute per rank unchanged (the same batch per rank)"
)
_FRAME = re.compile(r'File "(?P<file>.+)", line (?P<line>\d+) in (?P<function>\S+)')
_THREAD_HEADER = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-fA-F]+", re.MULTILINE)
_LIBRARY_PARTS = ("site-packages", "dist-packages", "/lib/python", "<frozen")
_PROBE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


@dataclass
class JobOutcome:
    """How the torchrun job ended, as the launcher saw it."""

    nproc: int
    backend: str
    strategies: list[str]
    user_file: str
    seconds: float
    error: str | None = None
    """"timeout", "cancelled", or why it could not launch; None when it exited."""
    exit_code: int | None = None
    rank_exit_codes: dict[int, int] = field(default_factory=dict)
    """From torchrun's failure summary: each failed rank's exit code (negative: signal)."""
    nnodes: int = 1


def is_user_frame(path: str, user_file: str) -> bool:
    if os.path.abspath(path) == os.path.abspath(user_file):
        return True
    if path.startswith("<") or os.path.abspath(path).startswith(_PROBE_DIR):
        return False
    return not any(part in path for part in _LIBRARY_PARTS)


def stack_from_dumps(text: str, user_file: str) -> list[StackFrame]:
    """The user's frames (innermost first) of the last thread dump that shows any: the latest
    word of a stuck or dying rank."""
    starts = [match.start() for match in _THREAD_HEADER.finditer(text)]
    blocks = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=False)]
    for block in reversed(blocks):
        frames = [
            StackFrame(m.group("file"), int(m.group("line")), m.group("function"))
            for m in _FRAME.finditer(block)
            if is_user_frame(m.group("file"), user_file)
        ]
        if frames:
            return frames
    return []


_RANK_FAILURE = re.compile(
    r"rank\s*:\s*(?P<rank>\d+)\s*\(local_rank:\s*\d+\)\s*\n\s*exitcode\s*:\s*(?P<code>-?\d+)"
)


def rank_exit_codes(torchrun_stderr: str) -> dict[int, int]:
    """Each failed rank's exit code from torchrun's "Failures:" summary."""
    return {
        int(m.group("rank")): int(m.group("code")) for m in _RANK_FAILURE.finditer(torchrun_stderr)
    }


def rank_run(rank: int, run: dict[str, Any]) -> RankRun:
    step = run["step"]
    return RankRun(
        rank=rank,
        step_median_ms=float(step["median_ms"]),
        step_min_ms=float(step["min_ms"]),
        step_max_ms=float(step["max_ms"]),
        iterations=int(step["iterations"]),
        warmup=int(step["warmup"]),
        profiled_step_ms=float(run["profiled_step_ms"]),
        comm_ms=float(run["comm_ms"]),
        comm_share=run.get("comm_share"),
        collectives=[
            CollectiveRow(str(c["kind"]), int(c["calls"]), float(c["ms"]), int(c["bytes"]))
            for c in run.get("collectives", [])
        ],
        bytes_per_step=int(run["bytes_per_step"]),
        peak_memory_bytes=int(run["peak_memory_bytes"]),
        memory_method=str(run["memory_method"]),
        param_bytes=int(run["param_bytes"]),
        grad_bytes=int(run["grad_bytes"]),
        optimizer_state_bytes=int(run["optimizer_state_bytes"]),
        output_shapes=[list(shape) for shape in run.get("output_shapes", [])],
    )


def shape_text(shapes: list[list[int]]) -> str:
    return ", ".join("x".join(map(str, shape)) or "scalar" for shape in shapes) or "nothing"


def strategy_result(
    strategy: str, runs: dict[int, dict[str, Any]], world_size: int
) -> StrategyResult:
    """One strategy over the ranks that finished it; the ranks that differ are named."""
    ranks = [rank_run(rank, runs[rank]) for rank in sorted(runs)]
    first = runs[min(runs)] if runs else {}
    differences: list[str] = []
    if len(ranks) >= 2:
        fastest = min(ranks, key=lambda r: r.step_median_ms)
        slowest = max(ranks, key=lambda r: r.step_median_ms)
        if slowest.step_median_ms > SKEW_RATIO * fastest.step_median_ms:
            differences.append(
                f"rank {slowest.rank} is slowest: {slowest.step_median_ms:.1f} ms median step "
                f"against {fastest.step_median_ms:.1f} ms on rank {fastest.rank}"
            )
        reference = ranks[0]
        for other in ranks[1:]:
            if other.output_shapes != reference.output_shapes:
                differences.append(
                    f"rank {other.rank} returns {shape_text(other.output_shapes)} while rank "
                    f"{reference.rank} returns {shape_text(reference.output_shapes)}"
                )
        unused = {rank: unused_names(runs[rank]) for rank in runs}
        if len({tuple(names) for names in unused.values()}) > 1:
            listed = "; ".join(
                f"rank {rank}: {', '.join(names) or 'none'}" for rank, names in unused.items()
            )
            differences.append(f"ranks leave different parameters without gradient ({listed})")
    missing = [rank for rank in range(world_size) if rank not in runs]
    if missing and runs:
        differences.append(
            f"rank(s) {', '.join(map(str, missing))} did not finish {strategy.upper()}"
        )

    def highest(values: Iterable[int]) -> int | None:
        found = list(values)
        return max(found) if found else None

    shares = [r.comm_share for r in ranks if r.comm_share is not None]
    return StrategyResult(
        strategy=strategy,  # type: ignore[arg-type]  # from outcome.strategies: "ddp" or "fsdp"
        ok=bool(ranks) and not missing,
        ranks=ranks,
        total_params=int(first.get("total_params", 0)),
        full_param_bytes=int(first.get("full_param_bytes", 0)),
        step_ms=max((r.step_median_ms for r in ranks), default=None),
        comm_share=statistics.fmean(shares) if shares else None,
        peak_memory_bytes=highest(r.peak_memory_bytes for r in ranks),
        param_bytes=highest(r.param_bytes for r in ranks),
        grad_bytes=highest(r.grad_bytes for r in ranks),
        optimizer_state_bytes=highest(r.optimizer_state_bytes for r in ranks),
        bytes_per_step=highest(r.bytes_per_step for r in ranks),
        find_unused_parameters=any(bool(r.get("find_unused_parameters")) for r in runs.values()),
        differences=differences,
    )


def unused_names(run: dict[str, Any]) -> list[str]:
    return [str(place["name"]) for place in run.get("unused_parameters", [])]


def unused_parameter_findings(ddp_runs: dict[int, dict[str, Any]]) -> list[DistributedFinding]:
    """TD601 at each declaration line, with the exact parameter names and the ranks."""
    by_place: dict[tuple[str | None, int | None], dict[str, list[int]]] = {}
    for rank in sorted(ddp_runs):
        for place in ddp_runs[rank].get("unused_parameters", []):
            key = (place.get("file"), place.get("line"))
            by_place.setdefault(key, {}).setdefault(str(place["name"]), []).append(rank)
    findings = []
    for (file, line), names in by_place.items():
        listed = ", ".join(names)
        ranks = sorted({rank for found in names.values() for rank in found})
        subject = f"parameter {listed} gets" if len(names) == 1 else f"parameters {listed} get"
        findings.append(
            DistributedFinding(
                code="TD601",
                kind="unused_parameter",
                severity="warning",
                message=(
                    f"{subject} no gradient under DistributedDataParallel (measured on rank(s) "
                    f"{', '.join(map(str, ranks))}): without find_unused_parameters=True DDP "
                    "raises 'Expected to have finished reduction in the prior iteration'; "
                    "pass it, or remove the parameters"
                ),
                file=file,
                line=line,
                detail=listed,
                ranks=ranks,
            )
        )
    return findings


def rank_status(
    rank: int,
    start: dict[str, Any] | None,
    record: dict[str, Any] | None,
    dumps: str,
    outcome: JobOutcome,
) -> RankStatus:
    error = (record or {}).get("error")
    traced = [
        StackFrame(str(f["file"]), int(f["line"]), str(f["function"]))
        for f in (error or {}).get("stack", [])
    ]
    dumped = stack_from_dumps(dumps, outcome.user_file)
    done = {str(run.get("strategy")) for run in (record or {}).get("runs") or []}
    finished = error is None and done >= set(outcome.strategies)
    status: Literal["ok", "raised", "killed", "timeout", "missing"]
    if start is None and record is None:
        status = "missing"
    elif error is not None:
        status = "raised"
    elif finished and outcome.error is None and rank not in outcome.rank_exit_codes:
        status = "ok"
    elif outcome.error == "timeout":
        status = "timeout"
    else:
        status = "killed"
    if status == "ok" and outcome.error is not None:
        status = "killed"
    kind = (error or {}).get("kind")
    if kind is None and status == "timeout" and _waits_in_collective(dumps):
        kind = "collective"  # still waiting in a collective when the probe's time ran out
    if kind is None and status == "killed" and outcome.rank_exit_codes.get(rank) == -6:
        kind = "collective" if _waits_in_collective(dumps) else "abort"
    return RankStatus(
        rank=rank,
        pid=(start or {}).get("pid"),
        host=(start or {}).get("host"),
        status=status,
        error_kind=kind,
        message=(error or {}).get("message"),
        strategy=(error or {}).get("strategy"),
        stack=traced or dumped,
        exit_code=outcome.rank_exit_codes.get(rank),
    )


def _waits_in_collective(dumps: str) -> bool:
    return "distributed_c10d.py" in dumps or "/distributed/" in dumps


def divergence_finding(statuses: list[RankStatus], user_file: str) -> DistributedFinding | None:
    """Ranks stuck in, or failing, collectives: each rank's stack at the user's lines."""
    involved = [s for s in statuses if s.error_kind == "collective" or s.status == "timeout"]
    if not involved:
        return None
    where = next(
        (
            s.stack[0]
            for s in statuses
            if s.stack and os.path.abspath(s.stack[0].file) == os.path.abspath(user_file)
        ),
        None,
    )
    lines = []
    for status in statuses:
        if status.stack:
            frames = " <- ".join(
                f"{os.path.basename(f.file)}:{f.line} in {f.function}" for f in status.stack[:4]
            )
        else:
            during = f" ({status.message})" if status.message else ""
            frames = f"no user frame on its stack{during}"
        lines.append(f"rank {status.rank} ({status.status}): {frames}")
    return DistributedFinding(
        code=None,
        kind="collective_divergence",
        severity="error",
        message=(
            "the ranks did not run the same collectives: a collective timed out, mismatched or "
            "lost its peer. Every rank must call the same collectives in the same order (look "
            "for rank-dependent control flow around the lines below)"
        ),
        file=where.file if where else None,
        line=where.line if where else None,
        detail="\n".join(lines),
        ranks=[s.rank for s in statuses if s.status != "ok"],
    )


def estimate(
    result: StrategyResult, measured_ranks: int, ranks: int, nodes: int
) -> Extrapolation | None:
    """One row of the extrapolation FORMULA describes."""
    if result.peak_memory_bytes is None or result.step_ms is None:
        return None
    peak = result.peak_memory_bytes
    if result.strategy == "fsdp":
        sharded = (result.param_bytes or 0) + (result.grad_bytes or 0)
        sharded += result.optimizer_state_bytes or 0
        memory = max(peak - sharded, 0) + sharded * measured_ranks // ranks
    else:
        memory = peak
    share = None
    if result.comm_share is not None and measured_ranks > 1:
        comm = result.comm_share * result.step_ms
        compute = max(result.step_ms - comm, 0.0)
        ring = ((ranks - 1) / ranks) / ((measured_ranks - 1) / measured_ranks)
        scaled = comm * ring * (INTER_NODE_SLOWDOWN if nodes > 1 else 1.0)
        share = scaled / (compute + scaled) if compute + scaled > 0 else None
    return Extrapolation(ranks, nodes, result.strategy, int(memory), share)


def fmt_gib(value: int | None) -> str:
    if value is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value} B"


def fmt_share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def recommendation(
    results: list[StrategyResult],
    measured_ranks: int,
    backend: str,
    device: str,
    device_memory: int | None,
    unused: bool,
) -> DistributedRecommendation | None:
    finished = {r.strategy: r for r in results if r.ok}
    if not finished:
        return None
    ddp, fsdp = finished.get("ddp"), finished.get("fsdp")
    parts = [
        f"{r.strategy.upper()} {fmt_gib(r.peak_memory_bytes)}/rank" for r in finished.values()
    ]
    comm = " vs ".join(fmt_share(r.comm_share) for r in finished.values())
    reason = (
        f"measured with {measured_ranks} ranks ({backend}, {device}): {', '.join(parts)}, "
        f"comm {comm} of the step"
    )
    if ddp and fsdp:
        reason += f", step {ddp.step_ms:.1f} ms vs {fsdp.step_ms:.1f} ms"
    ddp_peak = (ddp.peak_memory_bytes or 0) if ddp else 0
    choice: Literal["ddp", "fsdp"]
    if ddp and device_memory and ddp_peak > DEVICE_MEMORY_SHARE * device_memory:
        choice = "fsdp"
        reason += (
            f"; a DDP replica needs {ddp_peak / device_memory:.0%} of the "
            f"device's {fmt_gib(device_memory)}: shard with FSDP"
        )
    elif ddp and fsdp:
        choice = "ddp" if (ddp.step_ms or 0) <= (fsdp.step_ms or 0) * SKEW_RATIO else "fsdp"
        reason += (
            "; a full replica fits, DDP is the simpler and faster choice"
            if choice == "ddp"
            else "; FSDP was faster here"
        )
        if device_memory is None:
            reason += (
                f" (on a GPU: FSDP once DDP's per-rank peak passes "
                f"{DEVICE_MEMORY_SHARE:.0%} of its memory)"
            )
    else:
        choice = next(iter(finished))
    if unused:
        reason += "; some parameters get no gradient: DDP needs find_unused_parameters=True"
    estimates = [
        row
        for ranks, nodes in ESTIMATE_SHAPES
        for result in finished.values()
        if (row := estimate(result, measured_ranks, ranks, nodes)) is not None
    ]
    return DistributedRecommendation(choice, reason, FORMULA, estimates)


def summarize(
    outcome: JobOutcome,
    starts: dict[int, dict[str, Any]],
    records: dict[int, dict[str, Any]],
    dumps: dict[int, str],
) -> DistributedInfo:
    world_size = max(
        [outcome.nproc * outcome.nnodes]
        + [int(r.get("world_size", 0)) for r in [*starts.values(), *records.values()]]
    )
    runs_by_strategy: dict[str, dict[int, dict[str, Any]]] = {}
    for rank, record in records.items():
        for run in record.get("runs") or []:
            runs_by_strategy.setdefault(str(run["strategy"]), {})[rank] = run
    results = [
        strategy_result(strategy, runs_by_strategy[strategy], world_size)
        for strategy in outcome.strategies
        if strategy in runs_by_strategy
    ]
    statuses = [
        rank_status(rank, starts.get(rank), records.get(rank), dumps.get(rank, ""), outcome)
        for rank in range(world_size)
    ]
    findings = unused_parameter_findings(runs_by_strategy.get("ddp", {}))
    divergence = divergence_finding(statuses, outcome.user_file)
    if divergence is not None:
        findings.insert(0, divergence)
    warnings = []
    for status in statuses:
        if status.status == "raised" and status.error_kind != "collective":
            warnings.append(f"rank {status.rank} raised: {status.message}")
    any_record = next(iter(records.values()), {})
    device = str(any_record.get("device", "cpu")).split(":")[0]
    advice = recommendation(
        results,
        world_size,
        outcome.backend,
        device,
        any_record.get("device_memory_bytes"),
        any(r.find_unused_parameters for r in results),
    )
    return DistributedInfo(
        nproc=outcome.nproc,
        nnodes=outcome.nnodes,
        backend=outcome.backend,
        launcher=LAUNCHER,
        strategies=results,
        ranks=statuses,
        findings=findings,
        recommendation=advice,
        error=outcome.error,
        seconds=round(outcome.seconds, 3),
        warnings=warnings,
    )
