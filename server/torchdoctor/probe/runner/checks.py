"""Pass: runtime checks (float64, non-contiguous view, NaN/Inf, parameters without grad)."""

from __future__ import annotations

import contextlib
import linecache
import math
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .companions import companion_module
from .events import ProbeFailure
from .session import Session, iter_tensors
from .user_code import Location, UserCode

# Metadata queries that cannot create float64 or NaN and need no line attribution.
PASSTHROUGH_NAMES = frozenset(
    {
        "__get__", "size", "dim", "stride", "numel", "is_contiguous", "data_ptr", "element_size",
        "__len__", "is_floating_point", "is_complex", "storage_offset", "nelement", "ndimension",
        "backward", "__format__", "__repr__", "__bool__", "item", "tolist", "get_device",
        "requires_grad_", "__hash__", "__iter__", "has_names",
    }
)


@dataclass
class OpRecord:
    function: str
    location: Location | None
    inputs: list[int]


@dataclass
class FindingCollector:
    findings: dict[tuple[str, str, int], dict[str, Any]] = field(default_factory=dict)

    def add(
        self,
        kind: str,
        severity: str,
        message: str,
        where: Location | None,
        detail: str = "",
        count: int = 1,
    ) -> None:
        file, line = where if where else (None, None)
        key = (kind, file or "", line or 0)
        existing = self.findings.get(key)
        if existing is not None:
            existing["count"] += count
            return
        self.findings[key] = {
            "kind": kind,
            "severity": severity,
            "message": message,
            "file": file,
            "line": line,
            "count": count,
            "detail": detail,
        }

    def rows(self) -> list[dict[str, Any]]:
        return list(self.findings.values())


def make_check_mode(session: Session, collector: FindingCollector) -> Any:
    import torch
    from torch.overrides import TorchFunctionMode

    float64 = {torch.float64, torch.complex128}
    user = session.user

    view_layout = companion_module("view_layout")

    def report_fragile_view(source: Any, view_args: tuple[Any, ...], view: Any, where: Any) -> None:
        """A view that works here but not for every shape of this layout (view_layout.py)."""
        if len(view_args) == 1 and isinstance(view_args[0], torch.dtype):
            return
        sizes, strides, out = list(source.shape), list(source.stride()), list(view.shape)
        merges = view_layout.fragile_merges(sizes, strides, out)
        if merges:  # one finding per call, however many dimensions it merges
            message = view_layout.describe(sizes, strides, out, merges[0])
            collector.add("non_contiguous_view", "information", message, where)

    class CheckMode(TorchFunctionMode):
        """Looks at every torch call made while forward runs (above autograd, so it sees the
        user's own `.view()` calls), attributing each to the innermost user frame."""

        def __init__(self) -> None:
            super().__init__()
            self.records: list[OpRecord] = []
            self.sums: list[Any] = []  # one float64 sum per output: NaN/Inf read once at the end
            self.sum_owner: list[tuple[int, int]] = []  # (record index, tensor id)
            self.producer: dict[int, int] = {}  # id(tensor) -> index in sums
            self.line_shapes: dict[Location, list[int]] = {}
            self.float64_born: dict[int, tuple[str, Location | None]] = {}
            # Tensors are keyed by id(); holding them until the checked forward ends keeps
            # ids from being reused. Autograd keeps most of them for backward anyway, and
            # this is far cheaper than a weakref finalizer per tensor.
            self.held: list[Any] = []

        def note_float64_birth(self, tensor: Any, function: str, where: Location | None) -> None:
            self.float64_born[id(tensor)] = (function, where)
            self.held.append(tensor)

        def track_float64(
            self, function: str, where: Location | None, inputs: list[Any], outputs: list[Any]
        ) -> None:
            """Report the line where a float64 tensor is created (from_numpy of a float64
            array, .double(), dtype=torch.float64) once float64 actually flows on from it:
            `torch.from_numpy(a).float()` is fine and stays quiet."""
            made = [t for t in outputs if t.dtype in float64]
            if not made:
                return
            sources = [t for t in inputs if t.dtype in float64]
            if not sources:
                for tensor in made:
                    self.note_float64_birth(tensor, function, where)
                return
            for tensor in sources:
                self.report_float64_birth(tensor, f"used by {function}")

        def report_float64_birth(self, tensor: Any, how: str) -> None:
            born = self.float64_born.pop(id(tensor), None)
            if born is None:
                return
            creator, place = born
            collector.add(
                "float64",
                "warning",
                f"{creator} creates a float64 tensor here and it flows on ({how}): float64 "
                "is twice the memory, far slower (especially on GPUs), and mixing it with "
                "float32 weights raises 'expected scalar type'. Use dtype=torch.float32 or "
                ".float()",
                place,
                creator,
            )

        def __torch_function__(
            self, func: Any, types_: Any, args: tuple[Any, ...] = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name in PASSTHROUGH_NAMES:
                return func(*args, **kwargs)
            where = user.innermost_frame(sys._getframe(1))
            inputs = iter_tensors((args, kwargs))
            result = func(*args, **kwargs)
            outputs = iter_tensors(result)
            if name == "view" and inputs and outputs and (
                1 in inputs[0].shape or not inputs[0].is_contiguous()
            ):
                report_fragile_view(inputs[0], args[1:], outputs[0], where)
            self.record(func, name, where, inputs, outputs)
            return result

        def record(
            self,
            func: Any,
            name: str,
            where: Location | None,
            inputs: list[Any],
            outputs: list[Any],
        ) -> None:
            index = len(self.records)
            self.records.append(
                OpRecord(
                    name or str(func),
                    where,
                    [self.producer[id(t)] for t in inputs if id(t) in self.producer],
                )
            )
            if outputs and where is not None:
                # The last call on a line makes its value; of a tuple, the first tensor is
                # the main output (LSTM: output before the hidden states).
                self.line_shapes[where] = list(outputs[0].shape)
            self.track_float64(name or str(func), where, inputs, outputs)
            for tensor in outputs:
                if tensor.is_floating_point() and tensor.device.type != "meta":
                    self.producer[id(tensor)] = len(self.sums)
                    self.sum_owner.append((index, id(tensor)))
                    # detach(): no graph for the check, without a no_grad() per call.
                    self.sums.append(tensor.detach().sum(dtype=torch.float64))
                    self.held.append(tensor)

    return CheckMode()


@contextlib.contextmanager
def tracking_from_numpy(mode: Any, user: UserCode) -> Iterator[None]:
    """torch.from_numpy does not go through __torch_function__ modes; wrap it for the
    duration so float64 arrays converted in forward are seen where they are converted."""
    import torch

    original = torch.from_numpy

    def from_numpy(array: Any) -> Any:
        tensor = original(array)
        if tensor.dtype == torch.float64:
            mode.note_float64_birth(
                tensor, "torch.from_numpy", user.innermost_frame(sys._getframe(1))
            )
        return tensor

    torch.from_numpy = from_numpy  # type: ignore[assignment]  # patched for the pass, restored below
    try:
        yield
    finally:
        torch.from_numpy = original


def checks_pass(session: Session) -> tuple[list[dict[str, Any]], dict[Location, list[int]]]:
    import torch

    model = session.model
    collector = FindingCollector()
    named = [*model.named_parameters(), *model.named_buffers()]
    for name, tensor in named:
        if tensor.dtype == torch.float64:
            collector.add(
                "float64",
                "warning",
                f"{name} is float64: twice the memory of float32 and much slower on GPUs",
                session.tensor_origin(name, tensor),
                name,
            )
    floating = [(n, t) for n, t in named if t.is_floating_point() and t.numel()]
    if floating:
        with torch.no_grad():
            sums = read_scalars([t.sum(dtype=torch.float64) for _, t in floating])
        for (name, tensor), value in zip(floating, sums, strict=True):
            if not math.isfinite(value):
                collector.add(
                    "nan" if math.isnan(value) else "inf",
                    "warning",
                    f"{name} contains NaN/Inf before any forward pass (uninitialised memory "
                    "from torch.empty?)",
                    session.tensor_origin(name, tensor),
                    name,
                )

    mode = make_check_mode(session, collector)
    with mode, tracking_from_numpy(mode, session.user):
        output = session.forward()
    for tensor in iter_tensors(output):
        mode.report_float64_birth(tensor, "into the model's output")
    session.progress.stage("checks", "checked the forward pass", 0.5)
    report_nonfinite_outputs(mode, output, collector)
    mode.held.clear()

    if session.can_backward:
        session.backward(output)
        session.unused_parameters = report_parameters_without_grad(session, collector)
        if not any(f["kind"] in ("nan", "inf") for f in collector.rows()):
            report_nonfinite_grads(session, collector)
    del output
    model.zero_grad(set_to_none=True)
    return collector.rows(), mode.line_shapes


def checks_going_on_forward_only(
    session: Session, outcomes: Any
) -> tuple[list[dict[str, Any]], dict[Location, list[int]]]:
    """The checks pass; when its backward raises, the step is run once more to find the
    user's line (backward_origin.py), and the probe goes on forward-only: every later pass
    keeps its forward figures and the report names the failed pass."""
    import torch

    try:
        return checks_pass(session)
    except ProbeFailure as failure:
        if failure.kind != "backward":
            raise
        error_text = failure.message
    session.model.zero_grad(set_to_none=True)
    backward_origin = companion_module("backward_origin")
    origin = backward_origin.locate_backward_error(
        torch, session.forward, session.backward, session.user.innermost_frame,
        session.user.is_user_file,
    )
    session.model.zero_grad(set_to_none=True)
    where = origin.where if origin else None
    message = backward_origin.describe(
        origin or backward_origin.BackwardOrigin(None), error_text, source_text_at
    )
    outcomes.note_backward_failure("checks", message, where)
    at = f" at {os.path.basename(where[0])}:{where[1]}" if where else ""
    session.warnings.append(
        f"backward failed in the checks pass (the backward_error finding{at}); the probe went "
        "on forward-only: no forward+backward time or FLOPs, memory and profile of the forward"
    )
    session.can_backward = False
    findings, line_shapes = checks_pass(session)
    findings.append(
        {
            "kind": "backward_error", "severity": "error", "message": message,
            "file": where[0] if where else None, "line": where[1] if where else None,
            "count": 1, "detail": (origin.inplace_op if origin else None) or "backward",
        }
    )
    return findings, line_shapes


def source_text_at(where: Location) -> str:
    """The code on a line, without a trailing comment set off by two spaces (PEP 8)."""
    return linecache.getline(where[0], where[1]).split("  #")[0].strip()


def read_scalars(scalars: list[Any]) -> list[float]:
    """The values of 0-d tensors, one read per device: a model on a GPU may also compute on
    CPU tensors (an index built in forward), which one stack could not mix. Meta tensors
    hold no value and read as 0."""
    import torch

    values = [0.0] * len(scalars)
    by_device: dict[Any, list[int]] = {}
    for index, scalar in enumerate(scalars):
        by_device.setdefault(scalar.device, []).append(index)
    for device, indices in by_device.items():
        if device.type == "meta":
            continue
        read = torch.stack([scalars[i] for i in indices]).tolist()
        for index, value in zip(indices, read, strict=True):
            values[index] = value
    return values


def report_nonfinite_outputs(mode: Any, output: Any, collector: FindingCollector) -> None:
    """NaN/Inf that reach the model's output, reported where they first appear.

    Every op's outputs were summed (in float64, one reduction each) and nothing was read until
    now: one device sync. Walking back from the outputs through the ops that produced non-finite
    values finds the origin; an -inf attention mask that softmax absorbs is not reported.
    """
    if not mode.sums:
        return
    values = read_scalars(mode.sums)
    nonfinite = {i for i, v in enumerate(values) if not math.isfinite(v)}
    record_of_sum = [owner for owner, _ in mode.sum_owner]
    start = [mode.producer[id(t)] for t in iter_tensors(output) if id(t) in mode.producer]
    frontier = [record_of_sum[i] for i in start if i in nonfinite]
    seen: set[int] = set()
    origins: list[int] = []
    while frontier:
        index = frontier.pop()
        if index in seen:
            continue
        seen.add(index)
        record = mode.records[index]
        bad_inputs = [record_of_sum[i] for i in record.inputs if i in nonfinite]
        if bad_inputs:
            frontier.extend(bad_inputs)
        else:
            origins.append(index)
    sums_of_record: dict[int, list[float]] = {}
    for i, (owner, _) in enumerate(mode.sum_owner):
        sums_of_record.setdefault(owner, []).append(values[i])
    for index in sorted(origins):
        record = mode.records[index]
        has_nan = any(math.isnan(v) for v in sums_of_record.get(index, []))
        kind = "nan" if has_nan else "inf"
        label = "NaN" if has_nan else "Inf"
        collector.add(
            kind,
            "warning",
            f"{record.function} produces {label} here and it reaches the model's output",
            record.location,
            record.function,
        )


def report_parameters_without_grad(session: Session, collector: FindingCollector) -> list[str]:
    unused: list[str] = []
    by_place: dict[Location | None, list[str]] = {}
    for name, param in session.model.named_parameters():
        if param.requires_grad and param.grad is None:
            unused.append(name)
            by_place.setdefault(session.tensor_origin(name, param), []).append(name)
    for place, names in by_place.items():
        listed = ", ".join(names)
        subject = f"parameter {listed} gets" if len(names) == 1 else f"parameters {listed} get"
        collector.add(
            "unused_parameter",
            "warning",
            f"{subject} no gradient from backward: DistributedDataParallel needs "
            "find_unused_parameters=True (or remove them), else it raises 'Expected to have "
            "finished reduction in the prior iteration'",
            place,
            listed,
            count=len(names),
        )
    return unused


def report_nonfinite_grads(session: Session, collector: FindingCollector) -> None:
    import torch

    with_grad = [(n, p) for n, p in session.model.named_parameters() if p.grad is not None]
    if not with_grad:
        return
    values = torch.stack([p.grad.detach().sum(dtype=torch.float64) for _, p in with_grad])
    for (name, param), value in zip(with_grad, values.tolist(), strict=True):
        if not math.isfinite(value):
            label = "NaN" if math.isnan(value) else "Inf"
            collector.add(
                label.lower(),
                "warning",
                f"the gradient of {name} contains {label}",
                session.tensor_origin(name, param),
                name,
            )
