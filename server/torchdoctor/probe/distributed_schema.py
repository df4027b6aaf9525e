"""The `distributed` section of a probe report: DDP and FSDP measured across ranks (torchrun).

Standard library only, like schema.py, which holds it as `ProbeReport.distributed` (optional:
reports without it, schema 1, still load). Units are in the field names as in schema.py.
REPORT.md documents every field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

DISTRIBUTED_SCHEMA_VERSION = 2
"""A report that carries a `distributed` section says schema 2; one without says 1."""


@dataclass
class StackFrame:
    file: str
    line: int
    function: str


@dataclass
class CollectiveRow:
    kind: str
    """"all_reduce", "all_gather", "broadcast", "reduce_scatter"... from the backend's events."""
    calls: int
    ms: float
    """Time inside the backend's collectives in the profiled step (on gloo: its
    communication threads, which can overlap compute; on NCCL: kernel time)."""
    bytes: int
    """Payload handed to the collectives by this rank (tensor sizes, not wire bytes)."""


@dataclass
class RankRun:
    """One rank's measurements for one strategy."""

    rank: int
    step_median_ms: float
    step_min_ms: float
    step_max_ms: float
    iterations: int
    """Timed steps (forward, backward, AdamW step), after `warmup` untimed ones."""
    warmup: int
    profiled_step_ms: float
    """One more step, under the profiler (overhead included)."""
    comm_ms: float
    comm_share: float | None
    """comm_ms / profiled_step_ms, 0..1."""
    collectives: list[CollectiveRow]
    bytes_per_step: int
    peak_memory_bytes: int
    memory_method: str
    """"cuda_allocator" (max_memory_allocated) or "profiler_allocations" (CPU: parameters,
    buffers and optimizer state held before the step plus the peak of the step's
    allocations)."""
    param_bytes: int
    """Parameter bytes this rank holds: the whole model under DDP, its shard under FSDP."""
    grad_bytes: int
    optimizer_state_bytes: int
    output_shapes: list[list[int]]


@dataclass
class StrategyResult:
    strategy: Literal["ddp", "fsdp"]
    ok: bool
    """Every rank finished this strategy."""
    ranks: list[RankRun]
    total_params: int
    """sum(p.numel()) of the model before wrapping."""
    full_param_bytes: int
    """Parameter bytes of one full replica."""
    step_ms: float | None
    """The slowest rank's median step: the job moves at the pace of its slowest rank."""
    comm_share: float | None
    """Mean over ranks of comm_share."""
    peak_memory_bytes: int | None
    """Highest peak over the ranks."""
    param_bytes: int | None
    """Highest per-rank parameter bytes (likewise grad and optimizer state)."""
    grad_bytes: int | None
    optimizer_state_bytes: int | None
    bytes_per_step: int | None
    find_unused_parameters: bool
    """The probe wrapped DDP with find_unused_parameters=True because some parameter got no
    gradient (a TD601 finding says which)."""
    differences: list[str] = field(default_factory=list)
    """Ranks that differ, named: time skew, other output shapes, other unused parameters."""


@dataclass
class RankStatus:
    rank: int
    pid: int | None
    host: str | None
    status: Literal["ok", "raised", "killed", "timeout", "missing"]
    """"raised": the rank's code raised; "killed": it died without a result (a signal, or
    torchrun stopping it after another rank failed); "timeout": still running at the probe's
    time-out; "missing": it never started."""
    error_kind: str | None
    """"collective" (a collective timed out, mismatched or lost its peer) or a runner kind
    ("import", "init", "forward", "backward", "oom"...)."""
    message: str | None
    strategy: str | None
    """The strategy that was running when it failed."""
    stack: list[StackFrame]
    """The rank's Python stack at the user's lines, innermost first: from its traceback, or
    from faulthandler (watchdog on a stuck step, SIGUSR1 at the time-out, SIGTERM, abort)."""
    exit_code: int | None


@dataclass
class DistributedFinding:
    code: str | None
    """"TD601" for parameters without gradient under DDP; None for findings with no rule."""
    kind: str
    """"unused_parameter" or "collective_divergence"."""
    severity: str
    message: str
    file: str | None
    line: int | None
    detail: str
    """The parameter names, or each rank's stack in one line per rank."""
    ranks: list[int]


@dataclass
class Extrapolation:
    ranks: int
    nodes: int
    strategy: Literal["ddp", "fsdp"]
    memory_per_rank_bytes: int
    comm_share: float | None


@dataclass
class DistributedRecommendation:
    strategy: Literal["ddp", "fsdp"]
    reason: str
    """"measured with 2 ranks (gloo, cpu): DDP 1.9 GiB/rank, FSDP 0.7 GiB/rank, comm 31% vs
    44% of the step; ..."."""
    formula: str
    """How the estimates below were extrapolated (an estimate, not a measurement)."""
    estimates: list[Extrapolation]


@dataclass
class DistributedInfo:
    nproc: int
    """Ranks launched on this host (torchrun --nproc-per-node)."""
    nnodes: int
    backend: str
    launcher: str
    """"torch.distributed.run"."""
    strategies: list[StrategyResult]
    ranks: list[RankStatus]
    findings: list[DistributedFinding]
    recommendation: DistributedRecommendation | None
    """None when no strategy finished on every rank."""
    error: str | None
    """Why the job as a whole did not finish ("timeout", "cancelled", cannot launch); None
    when it finished."""
    seconds: float
    """Wall time of the torchrun job, start-up included."""
    warnings: list[str] = field(default_factory=list)
