"""Shapes by line: what every local of the user's own functions holds after each line of forward.

Loaded by runner/ from the file next to it (the runner imports only the standard library and
torch, and so does this module). During one dedicated forward (never a timed one) it follows the
code objects of the user's files that forward runs: the model's `forward`, the forwards of its
submodules defined in user files, and the user functions they call. Library code is never
traced line by line: on Python 3.12+ `sys.monitoring` switches line events on for user code
objects only (every other function is disabled after its first call); on 3.10-3.11 the
`sys.settrace` hook returns no line tracer for library frames.

After each executed line, every local that was bound or rebound by that line and holds a tensor
(or a tuple, list or dict of tensors) is recorded: shape, dtype, device, requires_grad and bytes.
A line that runs several times (a loop) keeps the values of its first and its last run and says
whether they varied. What one pass records is capped (lines, names per line, tensors per
container, line events in total); a capped pass says so in `truncated`.
"""

from __future__ import annotations

import math
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Caps: a forward of a deep model can execute millions of lines; the editor needs one answer per
# line, and a pass past these limits stops recording rather than slowing the probe down.
MAX_LINES = 2000  # distinct (file, line) records
MAX_NAMES_PER_LINE = 12
MAX_TENSORS_PER_VALUE = 8  # tensors listed for one tuple/list/dict
MAX_LINE_EVENTS = 200_000  # executed lines followed in one pass
CONTAINER_SCAN = 64  # items looked at when deciding whether a container holds tensors
RETURN_NAME = "return"  # not an identifier, so it never collides with a local

IsUserCode = Callable[[types.CodeType], bool]


@dataclass
class Limits:
    max_lines: int = MAX_LINES
    max_names_per_line: int = MAX_NAMES_PER_LINE
    max_tensors_per_value: int = MAX_TENSORS_PER_VALUE
    max_line_events: int = MAX_LINE_EVENTS


# --------------------------------------------------------------------------------------------
# Describing a value
# --------------------------------------------------------------------------------------------


# What is kept per tensor while tracing: (shape, dtype, device, requires_grad), torch's own
# objects, turned into JSON only once the pass is over (str() of a dtype on every line would
# cost more than the line). A tuple of these is also what tells two runs of a line apart.
Facts = tuple[Any, Any, Any, bool]


def facts_of(tensor: Any) -> Facts:
    return (tensor.shape, tensor.dtype, tensor.device, tensor.requires_grad)


@dataclass(frozen=True)
class Value:
    kind: str  # "tensor", "tuple", "list" or "dict"
    tensors: tuple[Facts, ...]
    count: int
    keys: tuple[str, ...] | None


def describe(value: Any, tensor_type: type, limit: int) -> Value | None:
    """A tensor or a tuple/list/dict holding tensors; None for anything else (modules, numbers,
    strings, containers without tensors)."""
    if isinstance(value, tensor_type):
        return Value("tensor", (facts_of(value),), 1, None)
    if isinstance(value, (tuple, list)):
        items = list(value[:CONTAINER_SCAN])
        keys = None
        kind = "tuple" if isinstance(value, tuple) else "list"
    elif isinstance(value, dict):
        pairs = list(value.items())[:CONTAINER_SCAN]
        items = [item for _, item in pairs]
        keys = tuple(str(key) for key, item in pairs if isinstance(item, tensor_type))[:limit]
        kind = "dict"
    else:
        return None
    tensors = [item for item in items if isinstance(item, tensor_type)]
    if not tensors:
        return None
    return Value(kind, tuple(facts_of(t) for t in tensors[:limit]), len(tensors), keys)


class JsonMaker:
    """Turns the kept facts into JSON once the pass is over. The names of dtypes and devices
    are cached: str() of a torch.device costs microseconds, and a report has thousands."""

    def __init__(self) -> None:
        self._names: dict[Any, str] = {}

    def name(self, value: Any) -> str:
        known = self._names.get(value)
        if known is None:
            known = self._names[value] = str(value).removeprefix("torch.")
        return known

    def facts(self, facts: Facts) -> dict[str, Any]:
        shape, dtype, device, requires_grad = facts
        return {
            "shape": list(shape),
            "dtype": self.name(dtype),
            "device": self.name(device),
            "requires_grad": bool(requires_grad),
            "bytes": math.prod(shape) * dtype.itemsize,
        }

    def value(self, value: Value) -> dict[str, Any]:
        return {
            "kind": value.kind,
            "tensors": [self.facts(facts) for facts in value.tensors],
            "count": value.count,
            "keys": list(value.keys) if value.keys is not None else None,
        }


# --------------------------------------------------------------------------------------------
# The records
# --------------------------------------------------------------------------------------------


@dataclass
class NameRecord:
    first: Value
    last: Value
    varies: bool = False
    runs: int = 1

    def update(self, value: Value) -> None:
        self.last = value
        self.runs += 1
        if not self.varies and value.tensors != self.first.tensors:
            self.varies = True


@dataclass
class LineRecord:
    file: str
    line: int
    function: str
    hits: int = 0
    names: dict[str, NameRecord] = field(default_factory=dict)


class Recorder:
    """Collects line records; shared by both tracing back ends."""

    def __init__(self, limits: Limits, tensor_type: type) -> None:
        self.limits = limits
        self.tensor_type = tensor_type
        self.records: dict[tuple[str, int], LineRecord] = {}
        self.line_events = 0
        self.truncated = False

    @property
    def full(self) -> bool:
        return self.line_events >= self.limits.max_line_events

    def record(self, code: types.CodeType, line: int, changed: list[tuple[str, Any]]) -> None:
        key = (code.co_filename, line)
        record = self.records.get(key)
        if record is None:
            if len(self.records) >= self.limits.max_lines:
                self.truncated = True
                return
            record = self.records[key] = LineRecord(code.co_filename, line, code.co_name)
        record.hits += 1
        for name, value in changed:
            try:
                info = describe(value, self.tensor_type, self.limits.max_tensors_per_value)
            except Exception:  # noqa: BLE001 - a half-built tensor subclass must not break forward
                info = None
            if info is None:
                continue
            known = record.names.get(name)
            if known is not None:
                known.update(info)
            elif len(record.names) < self.limits.max_names_per_line:
                record.names[name] = NameRecord(info, info)
            else:
                self.truncated = True

    def rows(self, source_line: Callable[[str, int], str]) -> list[dict[str, Any]]:
        make = JsonMaker()
        rows = []
        for record in sorted(self.records.values(), key=lambda r: (r.file, r.line)):
            rows.append(
                {
                    "file": record.file,
                    "line": record.line,
                    "function": record.function,
                    "code": source_line(record.file, record.line),
                    "hits": record.hits,
                    "names": [
                        {
                            "name": name,
                            "first": (first := make.value(entry.first)),
                            "last": first if entry.last is entry.first else make.value(entry.last),
                            "varies": entry.varies,
                            "runs": entry.runs,
                        }
                        for name, entry in record.names.items()
                    ],
                }
            )
        return rows


class FrameState:
    """One activation of a user function: the line that ran last and what its locals were
    bound to then (held by reference, so `is` tells a rebinding from an unchanged name)."""

    __slots__ = ("code", "previous_line", "bound", "started")

    def __init__(self, code: types.CodeType) -> None:
        self.code = code
        self.previous_line: int | None = None
        self.bound: dict[str, Any] = {}
        self.started = False

    def changed_locals(self, frame: types.FrameType) -> list[tuple[str, Any]]:
        changed = []
        bound = self.bound
        for name, value in frame.f_locals.items():
            if bound.get(name, bound) is value or name.startswith("."):
                continue
            bound[name] = value
            changed.append((name, value))
        return changed

    def on_line(self, frame: types.FrameType, line: int, recorder: Recorder) -> None:
        recorder.line_events += 1
        changed = self.changed_locals(frame)
        if not self.started:
            # the arguments, charged to the `def` line
            self.started = True
            recorder.record(self.code, self.code.co_firstlineno, changed)
        elif self.previous_line is not None:
            recorder.record(self.code, self.previous_line, changed)
        self.previous_line = line

    def on_return(self, frame: types.FrameType, value: Any, recorder: Recorder) -> None:
        if self.previous_line is None:
            return
        changed = self.changed_locals(frame)
        changed.append((RETURN_NAME, value))
        recorder.record(self.code, self.previous_line, changed)
        self.previous_line = None


def is_traceable(code: types.CodeType, is_user_code: IsUserCode) -> bool:
    # comprehensions and lambdas share their line with the enclosing statement
    return not code.co_name.startswith("<") and is_user_code(code)


# --------------------------------------------------------------------------------------------
# Back end for Python 3.10-3.11: sys.settrace, line tracers on user frames only
# --------------------------------------------------------------------------------------------


def trace_with_settrace(
    run: Callable[[], Any], is_user_code: IsUserCode, recorder: Recorder
) -> Any:
    verdicts: dict[types.CodeType, bool] = {}

    def local_tracer(state: FrameState) -> Callable[..., Any]:
        def trace(frame: types.FrameType, event: str, arg: Any) -> Any:
            if event == "line":
                if recorder.full:
                    recorder.truncated = True
                    return None
                state.on_line(frame, frame.f_lineno, recorder)
            elif event == "return":
                state.on_return(frame, arg, recorder)
            elif event == "exception":
                state.previous_line = None  # the line did not finish; nothing was bound
            return trace

        return trace

    def on_call(frame: types.FrameType, event: str, _arg: Any) -> Any:
        if event != "call" or recorder.full:
            return None
        code = frame.f_code
        verdict = verdicts.get(code)
        if verdict is None:
            verdict = verdicts[code] = is_traceable(code, is_user_code)
        return local_tracer(FrameState(code)) if verdict else None

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        return run()
    finally:
        sys.settrace(previous)


# --------------------------------------------------------------------------------------------
# Back end for Python 3.12+: sys.monitoring, line events on user code objects only
# --------------------------------------------------------------------------------------------


def trace_with_monitoring(
    run: Callable[[], Any], is_user_code: IsUserCode, recorder: Recorder
) -> Any:
    monitoring = sys.monitoring  # type: ignore[attr-defined]  # 3.12+; mypy checks as 3.11
    events = monitoring.events
    tool = next(
        (i for i in range(6) if monitoring.get_tool(i) is None), None
    )  # 0-5 are the tool ids a program may take
    if tool is None:
        raise RuntimeError("every sys.monitoring tool id is taken")
    monitoring.use_tool_id(tool, "torchdoctor line shapes")
    states: dict[int, FrameState] = {}
    instrumented: list[types.CodeType] = []
    disable = monitoring.DISABLE

    def on_start(code: types.CodeType, _offset: int) -> Any:
        if recorder.full or not is_traceable(code, is_user_code):
            return disable  # this code object is never reported again in this pass
        if code not in instrumented:
            instrumented.append(code)
            monitoring.set_local_events(tool, code, events.LINE | events.PY_RETURN)
        # a new activation: a frame object can be reused by a later call
        states[id(sys._getframe(1))] = FrameState(code)
        return None

    def on_line(code: types.CodeType, line: int) -> Any:
        if recorder.full:
            recorder.truncated = True
            return disable
        frame = sys._getframe(1)
        state = states.get(id(frame))
        if state is None:
            state = states[id(frame)] = FrameState(code)
        state.on_line(frame, line, recorder)
        return None

    def on_return(code: types.CodeType, _offset: int, value: Any) -> Any:
        frame = sys._getframe(1)
        state = states.pop(id(frame), None)
        if state is not None:
            state.on_return(frame, value, recorder)
        return None

    monitoring.register_callback(tool, events.PY_START, on_start)
    monitoring.register_callback(tool, events.LINE, on_line)
    monitoring.register_callback(tool, events.PY_RETURN, on_return)
    monitoring.set_events(tool, events.PY_START)
    try:
        return run()
    finally:
        monitoring.set_events(tool, events.NO_EVENTS)
        for code in instrumented:
            monitoring.set_local_events(tool, code, events.NO_EVENTS)
        for event in (events.PY_START, events.LINE, events.PY_RETURN):
            monitoring.register_callback(tool, event, None)
        monitoring.free_tool_id(tool)
        monitoring.restart_events()  # re-arm the code objects this pass disabled


def tracing_method() -> str:
    return "sys.monitoring" if sys.version_info >= (3, 12) else "sys.settrace"


# --------------------------------------------------------------------------------------------
# The pass
# --------------------------------------------------------------------------------------------


def line_shapes_pass(
    run: Callable[[], Any],
    is_user_code: IsUserCode,
    tensor_type: type,
    source_line: Callable[[str, int], str],
    limits: Limits | None = None,
) -> dict[str, Any]:
    """Run `run()` (one forward) with the tracer on; the report's `line_shapes` object."""
    recorder = Recorder(limits or Limits(), tensor_type)
    method = tracing_method()
    backend = trace_with_monitoring if method == "sys.monitoring" else trace_with_settrace
    started = time.perf_counter()
    output = backend(run, is_user_code, recorder)
    traced_ms = (time.perf_counter() - started) * 1000
    del output
    return {
        "method": method,
        "traced_forward_ms": traced_ms,
        "line_events": recorder.line_events,
        "truncated": recorder.truncated,
        "lines": recorder.rows(source_line),
    }
