"""Report types of the shapes-by-line pass and the batch-size sweep (standard library only).

Both are optional fields of `ProbeReport` (`line_shapes`, `batch_sweep`): reports written before
them still load. REPORT.md documents the fields.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TensorFacts:
    shape: list[int]
    dtype: str
    """Without the "torch." prefix: "float32"."""
    device: str
    """As torch prints it: "cpu", "cuda:0"."""
    requires_grad: bool
    bytes: int
    """numel x element size: the tensor's own data (a view counts its view, not the storage)."""


@dataclass
class LocalValue:
    kind: str
    """"tensor", or "tuple" / "list" / "dict" of tensors."""
    tensors: list[TensorFacts]
    """The tensor, or the container's tensors in order (the first few; `count` says how many)."""
    count: int
    """Tensors in the container (1 for a tensor)."""
    keys: list[str] | None
    """For a dict: the keys of the tensors listed."""


@dataclass
class LocalShape:
    name: str
    """The local, or "return" for the value the function returned on this line."""
    first: LocalValue
    """After the line's first run."""
    last: LocalValue
    """After its last run (the same as `first` when it ran once)."""
    varies: bool
    """Some run gave another shape, dtype, device or requires_grad than the first."""
    runs: int
    """Runs of the line that bound this name to a tensor."""


@dataclass
class LineShapes:
    file: str
    line: int
    """1-based. Arguments are charged to the function's `def` line."""
    function: str
    code: str
    """The source line, stripped."""
    hits: int
    """Times the line ran in the traced forward."""
    names: list[LocalShape]
    """Locals bound or rebound by the line that hold tensors, in the order they were found."""


@dataclass
class LineShapesInfo:
    method: str
    """"sys.monitoring" (Python 3.12+) or "sys.settrace" (3.10-3.11)."""
    traced_forward_ms: float
    """Wall time of the traced forward, tracing included."""
    line_events: int
    """Executed lines followed (user code only)."""
    truncated: bool
    """A cap was reached: lines, names per line or line events (see line_shapes.py)."""
    lines: list[LineShapes]


@dataclass
class BatchPoint:
    batch: int
    fits: bool
    """The forward+backward step ran and its peak memory stayed under the limit."""
    latency_ms: float | None
    """Median forward+backward time; None when it did not fit."""
    samples_per_s: float | None
    peak_bytes: int | None
    """Peak memory of one step (CUDA allocator, or the profiler's allocations on CPU)."""
    reason: str | None
    """Why it did not fit: "out of memory", "over the memory limit", "time budget"."""


@dataclass
class BatchSweepInfo:
    points: list[BatchPoint]
    """Every batch size tried, in the order tried (doubling first, then the binary search)."""
    largest_fitting_batch: int | None
    memory_limit_bytes: int | None
    """The cap the sizes were held to: --max-memory, else the GPU's memory; None: no cap."""
    stopped_by: str
    """"memory", "time", "max_batch" or "list" (every size asked for was tried)."""
    seconds: float
