"""The probe report and the events that carry it, as plain dataclasses (standard library only).

The runner (which cannot import this package) writes these as JSON; the language server, the
CLI and the editor read them back with `from_dict`. Units are in the field names: `_ms` is
milliseconds, `_bytes` is bytes, FLOPs are floating-point operations (a multiply-add is 2).
REPORT.md next to this file documents every field with an example.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, Union

from .construction_schema import ConstructionInfo, PrecisionInfo
from .distributed_schema import DISTRIBUTED_SCHEMA_VERSION, DistributedInfo
from .outcome_schema import FailedPass
from .shape_schema import BatchSweepInfo, LineShapesInfo

SCHEMA_VERSION = 1

T = TypeVar("T")


class SchemaError(ValueError):
    """A report or event that does not match this schema."""


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


@dataclass
class DeviceInfo:
    kind: str
    """"cpu" or "cuda": where the model ran."""
    name: str
    """GPU name from torch.cuda.get_device_name, or the CPU model name."""
    index: int | None
    """CUDA device index; None on CPU."""
    total_memory_bytes: int | None
    """GPU memory (CUDA) or physical RAM (CPU); None when unknown."""
    capability: str | None
    """CUDA compute capability such as "9.0"; None on CPU."""
    threads: int
    """torch intra-op threads during the probe (torch.get_num_threads())."""


@dataclass
class InputTensor:
    path: str
    """Where the tensor sits in the call: "args[0]", "kwargs['mask']"."""
    shape: list[int]
    dtype: str
    """torch dtype without the "torch." prefix: "float32", "int64"."""


@dataclass
class InputInfo:
    source: str
    """How the input was chosen: "argument" (--input / the editor), "example" (an
    example_input()/example_inputs/example_input_array/dummy_inputs the code provides),
    "comment" (a `# torchdoctor: input=` comment) or "inferred" (from the first layer)."""
    detail: str
    """Human-readable: which hook, which comment line, or which layer and how it was verified."""
    spec: str | None
    """The input in --input syntax, e.g. "(8, 3, 224, 224)", to pin it; None when the input
    is not plain tensors (a dict, nested structures)."""
    tensors: list[InputTensor]
    """Every tensor passed to forward."""


@dataclass
class ParamInfo:
    total: int
    """Distinct parameters (shared ones counted once): sum(p.numel())."""
    trainable: int
    """Those with requires_grad."""
    parameter_bytes: int
    buffer_bytes: int
    """Registered buffers (BatchNorm running stats, ...)."""


@dataclass
class ModuleRow:
    name: str
    """Qualified name from named_modules(); "" is the model itself."""
    type: str
    """Class name: "Conv2d", "TransformerEncoderLayer"."""
    depth: int
    """0 for the model, 1 for its children, ..."""
    output_shapes: list[list[int]] | None
    """Shape of every tensor the module returned in the last call (tuples flattened);
    None when forward never called it."""
    calls: int
    """How many times forward called it."""
    forward_ms: float | None
    """Inclusive forward time of all its calls, from hooks (autograd on, synchronised on GPU)."""
    params: int
    """Parameters of this module and its children."""
    trainable_params: int
    flops: int | None
    """Forward FLOPs of the module and its children (FlopCounterMode); None when it counted
    none (elementwise, normalisation and recurrent ops are not counted)."""
    file: str | None
    """Where it was created in user code: `self.conv = nn.Conv2d(...)`, or the line of the
    library layer that built it; None when not findable."""
    line: int | None
    """1-based line of that creation."""
    registered: bool = True
    """False for a module the model reaches through a plain list, dict or attribute but does
    not own (not in named_modules(): not trained, moved or saved with it)."""


@dataclass
class TimingStats:
    iterations: int
    """Timed iterations (the probe stops early once its time budget is spent, minimum 3)."""
    warmup: int
    """Untimed iterations run first."""
    median_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    """Interquartile range (max - min below four samples): the spread."""


@dataclass
class LatencyInfo:
    method: str
    """"perf_counter" (CPU wall clock per step) or "cuda_events" (CUDA events around each
    step, one synchronize at the end)."""
    mode: str
    """"train" or "eval": the module mode while timing (the probe uses train)."""
    grad_enabled: bool
    """Autograd was on for the forward timing, so forward_backward - forward is backward."""
    forward: TimingStats
    forward_backward: TimingStats | None
    """None when no output requires grad."""


@dataclass
class MemoryInfo:
    method: str
    """"cuda_allocator" (reset_peak_memory_stats + max_memory_allocated around one step) or
    "profiler_allocations" (running sum of the profiler's CPU allocation records)."""
    baseline_bytes: int
    """Allocated before the step: parameters, buffers and input (all CUDA memory on GPU)."""
    peak_bytes: int
    """Highest allocated during one forward+backward step, baseline included."""
    activation_bytes: int
    """peak_bytes - baseline_bytes: what the step itself needs."""
    peak_reserved_bytes: int | None
    """CUDA caching-allocator reservation peak (max_memory_reserved); None on CPU."""


@dataclass
class FlopsInfo:
    forward: int
    forward_backward: int | None
    """None when backward was skipped."""
    counter: str
    """What counted them: torch.utils.flop_counter.FlopCounterMode (matmul/conv-like ops)."""


@dataclass
class OpRow:
    name: str
    """ATen operator or autograd node: "aten::addmm", "autograd::engine::evaluate_function:
    AddmmBackward0"."""
    calls: int
    self_ms: float
    """Host time inside the op, excluding ops it called (profiled step)."""
    total_ms: float
    """Host time including the ops it called."""
    self_device_ms: float | None
    """Kernel time on the GPU (CUDA); None on CPU."""
    share: float | None
    """self time / the step's total self time (device time on CUDA), 0..1."""


@dataclass
class LineRow:
    file: str
    line: int
    function: str
    """Function the line belongs to ("forward")."""
    code: str
    """The source line, stripped."""
    calls: int
    """torch calls made directly on this line during the profiled forward."""
    forward_ms: float
    """Host time of the torch calls on this line and in everything it calls (inclusive),
    profiled step: profiler overhead included, compare lines with each other."""
    backward_ms: float
    """Backward time of the autograd nodes those calls created (tied by sequence number)."""
    self_ms: float
    """forward + backward time of the calls made directly on this line."""
    device_ms: float | None
    """CUDA kernel time, inclusive, forward + backward; None on CPU."""
    net_alloc_bytes: int
    """Memory still allocated after the line's forward calls: its outputs and whatever
    autograd saved for backward."""
    output_shape: list[int] | None
    """Shape of the last tensor computed on the line (first tensor of a tuple)."""
    share: float | None
    """This line's inclusive time / the whole step's attributed time, 0..1."""


@dataclass
class RuntimeFinding:
    kind: str
    """"float64" (float64 enters here), "non_contiguous_view" (.view() on a non-contiguous
    tensor), "nan" / "inf" (first op whose NaN/Inf reaches the output, or a parameter or
    gradient holding them), "unused_parameter" (no gradient after backward),
    "unregistered_module" (modules in a plain list/dict that run in forward, at the line that
    stores them), "backward_error" (backward raised: at the in-place op that changed a saved
    tensor, else the forward call whose gradient failed)."""
    severity: str
    """"error", "warning" or "information", as for static findings."""
    message: str
    file: str | None
    line: int | None
    count: int
    """Times it happened at this place during the checked step (for unused_parameter: how
    many parameters declared there get no gradient)."""
    detail: str
    """The parameter(s) or function concerned, when there is one."""


@dataclass
class GraphBreak:
    reason: str
    file: str | None
    line: int | None


@dataclass
class GraphBreakInfo:
    graph_count: int | None
    graph_break_count: int | None
    breaks: list[GraphBreak]
    seconds: float
    """How long torch._dynamo.explain took."""
    error: str | None
    """Why explain failed; None when it ran."""


@dataclass
class Recommendation:
    strategy: Literal["ddp", "fsdp_shard_grad_op", "fsdp_full_shard"]
    reason: str
    """The numbers behind the choice, in a sentence."""
    bytes_per_trainable_param: int
    """16: Adam in mixed precision (fp32 weights, grads and two moments)."""
    model_state_bytes: int
    """bytes_per_trainable_param x trainable + frozen parameter bytes + buffer bytes."""
    activation_bytes: int
    """Measured activation memory of one step at the probe's input."""
    total_bytes: int
    device_memory_bytes: int | None
    """The GPU's memory; None when the probe ran on CPU."""
    state_fraction: float | None
    """model_state_bytes / device memory (FSDP SHARD_GRAD_OP above 0.4)."""
    total_fraction: float | None
    """total_bytes / device memory (FSDP FULL_SHARD above 0.8)."""
    find_unused_parameters: bool
    """DDP needs find_unused_parameters=True: some parameter got no gradient."""
    unused_parameters: list[str]


@dataclass
class ProbeReport:
    schema: int
    """Report format version: 1."""
    file: str
    """Absolute path of the probed file."""
    target: str
    """Class (or factory function) that was probed."""
    torch_version: str
    python_version: str
    device: DeviceInfo
    input: InputInfo
    params: ParamInfo
    modules: list[ModuleRow]
    latency: LatencyInfo
    memory: MemoryInfo
    flops: FlopsInfo
    top_ops: list[OpRow]
    lines: list[LineRow]
    """Per source line of user code that ran torch calls, sorted by file and line."""
    profiled_step_ms: float
    """Wall time of the profiled step (profiler overhead included)."""
    op_total_ms: float
    """Sum of self time over all ops of the profiled step (device time on CUDA)."""
    findings: list[RuntimeFinding]
    graph_breaks: GraphBreakInfo | None
    """Present only when asked for (--explain)."""
    recommendation: Recommendation
    warnings: list[str] = field(default_factory=list)
    """Non-fatal problems: "backward skipped: no output of forward requires grad"."""
    stage_seconds: dict[str, float] = field(default_factory=dict)
    """How long each stage of the probe took."""
    construction: ConstructionInfo | None = None
    """How the model was built: which arguments __init__ got, or which factory."""
    precision: PrecisionInfo | None = None
    """The dtype, autocast and memory format the probe ran (and timed) the model in."""
    failed_passes: list[FailedPass] = field(default_factory=list)
    """Passes that failed while the probe went on: a backward that raised (the figures that
    need backward are then missing, the forward ones kept)."""
    line_shapes: LineShapesInfo | None = None
    """Every tensor local of the user's functions, line by line (one traced forward)."""
    batch_sweep: BatchSweepInfo | None = None
    """Only with --batch-sweep: latency and memory per batch size, the largest that fits."""
    distributed: DistributedInfo | None = None
    """Only with --nproc: DDP/FSDP measured across ranks under torchrun (schema 2)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: object, *, strict: bool = False) -> ProbeReport:
        """Build a report from its JSON form. Unknown keys are ignored unless `strict`."""
        if not isinstance(data, dict):
            raise SchemaError("a report is a JSON object")
        if data.get("schema") not in (SCHEMA_VERSION, DISTRIBUTED_SCHEMA_VERSION):
            raise SchemaError(
                f"report schema {data.get('schema')!r} is not supported (expected "
                f"{SCHEMA_VERSION}): update torchdoctor"
            )
        return typing.cast(ProbeReport, _build(cls, data, "report", strict))

    def module(self, name: str) -> ModuleRow | None:
        return next((row for row in self.modules if row.name == name), None)

    def hot_lines(self, limit: int = 10) -> list[LineRow]:
        """Lines where the time is really spent: by self time, largest first."""
        return sorted(self.lines, key=lambda row: row.self_ms, reverse=True)[:limit]


# --------------------------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------------------------


@dataclass
class ProgressEvent:
    stage: str
    """"load", "build", "input", "shapes", "checks", "flops", "timing", "memory",
    "profile", "explain", "report"."""
    message: str
    percent: float
    """0..100, never decreasing within one probe."""


@dataclass
class ResultEvent:
    report: ProbeReport


@dataclass
class ErrorEvent:
    kind: str
    """From the runner: "usage", "environment" (torch missing), "file", "syntax", "import",
    "target", "init", "input", "device", "forward", "backward", "oom", "exit", "internal",
    "exited" (the probe's child ended without a result), "protocol". From the client: "spawn"
    (the interpreter could not start), "exited" (the runner ended without a result),
    "protocol" (a line that is not a JSON event), "timeout", "flood" (too much output),
    "cancelled"."""
    message: str
    file: str | None = None
    """The user's file the error points at, when known."""
    line: int | None = None
    traceback: str | None = None
    exit_code: int | None = None
    """Exit status (negative: killed by that signal) of the runner, or of the child that ran
    the probe, for "exited" errors."""
    stderr_tail: str | None = None
    """The end of the runner's stderr (the user's prints and warnings go there)."""
    failed_pass: str | None = None
    """The pass that failed ("shapes", "checks", "flops", "timing", "memory", "profile");
    None when the probe failed before its passes began."""
    partial: dict[str, Any] | None = None
    """The report fields measured before that pass (same format as the report's)."""


ProbeEvent = ProgressEvent | ResultEvent | ErrorEvent
FinalEvent = ResultEvent | ErrorEvent


def parse_event(data: dict[str, Any]) -> ProbeEvent | None:
    """The event for one decoded JSON line; None for events clients may ignore ("ready")."""
    kind = data.get("event")
    if kind == "progress":
        return ProgressEvent(
            stage=str(data.get("stage", "")),
            message=str(data.get("message", "")),
            percent=float(data.get("percent") or 0.0),
        )
    if kind == "result":
        return ResultEvent(ProbeReport.from_dict(data.get("report")))
    if kind == "error":
        return ErrorEvent(
            kind=str(data.get("kind", "internal")),
            message=str(data.get("message", "")),
            file=data.get("file"),
            line=data.get("line"),
            traceback=data.get("traceback"),
            exit_code=data["exit_code"] if type(data.get("exit_code")) is int else None,
            failed_pass=data["failed_pass"] if isinstance(data.get("failed_pass"), str) else None,
            partial=data["partial"] if isinstance(data.get("partial"), dict) else None,
        )
    if kind == "ready":
        return None
    raise SchemaError(f"unknown event {kind!r}")


# --------------------------------------------------------------------------------------------
# from_dict machinery: nested dataclasses, lists, dicts and optionals from type hints
# --------------------------------------------------------------------------------------------


def _build(tp: Any, value: Any, where: str, strict: bool) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None:
            if type(None) in options:
                return None
            raise SchemaError(f"{where} must not be null")
        inner = [o for o in options if o is not type(None)]
        return _build(inner[0], value, where, strict)
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise SchemaError(f"{where} must be one of {typing.get_args(tp)}, not {value!r}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise SchemaError(f"{where} must be a list")
        (item,) = typing.get_args(tp)
        return [_build(item, v, f"{where}[{i}]", strict) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise SchemaError(f"{where} must be an object")
        _, item = typing.get_args(tp)
        return {k: _build(item, v, f"{where}.{k}", strict) for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return _build_dataclass(tp, value, where, strict)
    return _check_scalar(tp, value, where)


def _build_dataclass(tp: Any, value: Any, where: str, strict: bool) -> Any:
    if not isinstance(value, dict):
        raise SchemaError(f"{where} must be an object")
    hints = typing.get_type_hints(tp)
    known = {f.name: f for f in dataclasses.fields(tp)}
    if strict:
        unknown = set(value) - set(known)
        if unknown:
            raise SchemaError(f"{where} has unknown fields {sorted(unknown)}")
    arguments = {}
    for name, spec in known.items():
        if name in value:
            arguments[name] = _build(hints[name], value[name], f"{where}.{name}", strict)
        elif spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
            raise SchemaError(f"{where}.{name} is missing")
    return tp(**arguments)


def _check_scalar(tp: Any, value: Any, where: str) -> Any:
    if tp is Any:
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SchemaError(f"{where} must be a number, not {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SchemaError(f"{where} must be an integer, not {value!r}")
        return value
    if tp in (str, bool) and not isinstance(value, tp):
        raise SchemaError(f"{where} must be a {tp.__name__}, not {value!r}")
    return value
