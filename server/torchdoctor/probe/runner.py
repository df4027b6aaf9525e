"""Probe a PyTorch model inside the user's own interpreter and stream the results as JSON lines.

This file runs under the interpreter that has the user's torch (and CUDA), not under the
language server. It imports only the standard library, torch and the standard-library modules
next to it (COMPANION_MODULES, loaded by path), so it keeps working when it is copied out of
the package with them and started on its own:

    python runner.py --file model.py --target Net [--input "(8, 3, 224, 224)"]
                     [--init JSON | --factory MOD:FN] [--dtype DTYPE] [--amp] [--channels-last]
                     [--device auto|cuda|cpu] [--iters N] [--threads N] [--explain]
    python runner.py --worker      # serve JSON requests from stdin, one per line

Every line on stdout is one JSON event: ``{"event": "progress", ...}`` while it works, then
exactly one ``{"event": "result", "report": {...}}`` or ``{"event": "error", ...}`` per probe.
The user's own output (print, C-level writes to fd 1) is sent to stderr so it can never corrupt
that stream. The report's fields are documented in REPORT.md next to this file.

Each probe runs in a child forked for it (see "One probe per forked child" below): the process
started by the client imports torch, relays the child's events and kills whatever the probe
started, and exits when the client's request pipe closes.

Measurement passes are kept apart: timing passes run the bare model; shapes, checks, FLOPs and
the profiled step each run in their own pass, so no instrumentation shows up in the timings.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import faulthandler
import importlib.util
import io
import json
import linecache
import math
import os
import platform
import re
import select
import signal
import site
import stat
import statistics
import sys
import sysconfig
import textwrap
import time
import tokenize
import traceback
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1
DEFAULT_ITERS = 10
DEFAULT_WARMUP = 2
DEFAULT_TIMING_BUDGET_S = 4.0
INFERRED_BATCH = 8
FALLBACK_BATCH = 2
MAX_TRACEBACK_CHARS = 6000
TOP_OPS = 15
# Adam in mixed precision: fp32 master weights (4) + fp32 grads (4) + two fp32 moments (8);
# the bf16 working copy is usually counted with activations (the usual ZeRO accounting).
STATE_BYTES_PER_PARAM = 16
DEVICE_CHOICES = ("auto", "cpu", "cuda")


# --------------------------------------------------------------------------------------------
# Errors and events
# --------------------------------------------------------------------------------------------


class ProbeFailure(Exception):
    """A probe that cannot go on; becomes one error event pointing at the user's code."""

    def __init__(
        self,
        kind: str,
        message: str,
        file: str | None = None,
        line: int | None = None,
        trace: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.file = file
        self.line = line
        self.trace = trace
        # optional event fields: `failed_pass` and `partial` (pass_outcomes.py)
        self.extra: dict[str, Any] = {}

    def to_event(self) -> dict[str, Any]:
        return {
            "event": "error",
            "kind": self.kind,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "traceback": self.trace,
            **self.extra,
        }


def json_safe(value: Any) -> Any:
    """JSON has no NaN/Infinity: those become null so every client can parse the stream."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


class EventStream:
    """Writes events to a private copy of the original stdout."""

    def __init__(self, fd: int) -> None:
        self._out = os.fdopen(fd, "w", encoding="utf-8", buffering=1)
        self.request_id: Any = None

    def fileno(self) -> int:
        return self._out.fileno()

    def emit(self, event: dict[str, Any]) -> None:
        if self.request_id is not None:
            event = {**event, "id": self.request_id}
        self._out.write(json.dumps(json_safe(event), allow_nan=False) + "\n")
        self._out.flush()


def take_over_stdout() -> EventStream:
    """Keep fd 1 for events only: the user's prints and C-level writes go to stderr."""
    sys.stdout.flush()
    event_fd = os.dup(1)
    os.dup2(2, 1)
    return EventStream(event_fd)


def take_over_stdin() -> int:
    """Keep the request pipe private: user code calling input() reads /dev/null instead.
    Returns the pipe's descriptor; its end of file tells that the client has gone."""
    request_fd = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # lives as long as the process
    return request_fd


# Percent ranges per stage, so progress is monotonic whatever the model does.
STAGE_RANGES: dict[str, tuple[int, int]] = {
    "load": (0, 4),
    "build": (4, 8),
    "input": (8, 16),
    "shapes": (16, 26),
    "checks": (26, 36),
    "flops": (36, 44),
    "timing": (44, 78),
    "memory": (78, 82),
    "profile": (82, 94),
    "sweep": (94, 96),
    "explain": (94, 99),
    "report": (99, 100),
}


class Progress:
    def __init__(self, events: EventStream) -> None:
        self._events = events
        self._percent = 0.0
        self.stage_seconds: dict[str, float] = {}
        self._stage: str | None = None
        self._stage_started = time.perf_counter()
        self.outcomes: Any = None  # pass_outcomes.PassOutcomes, once the passes begin

    @property
    def current_stage(self) -> str | None:
        return self._stage

    def stage(self, name: str, message: str, fraction: float = 0.0) -> None:
        if name != self._stage:
            self._close_stage()
            self._stage = name
            self._stage_started = time.perf_counter()
        low, high = STAGE_RANGES[name]
        percent = max(self._percent, low + (high - low) * min(max(fraction, 0.0), 1.0))
        self._percent = percent
        self._events.emit(
            {"event": "progress", "stage": name, "message": message, "percent": round(percent, 1)}
        )

    def _close_stage(self) -> None:
        if self._stage is not None:
            elapsed = time.perf_counter() - self._stage_started
            self.stage_seconds[self._stage] = self.stage_seconds.get(self._stage, 0.0) + elapsed

    def finish(self) -> dict[str, float]:
        self._close_stage()
        self._stage = None
        return {name: round(seconds, 4) for name, seconds in self.stage_seconds.items()}


# --------------------------------------------------------------------------------------------
# Telling the user's code apart from libraries
# --------------------------------------------------------------------------------------------

Location = tuple[str, int]
Frame = tuple[str, int, str]  # file, line, function


class UserCode:
    """Decides which frames are the user's: anything that is not the stdlib, site-packages,
    torch itself or this runner. Results are cached per code object because checks walk the
    stack on every torch call."""

    def __init__(self) -> None:
        import torch

        roots = {os.path.dirname(os.__file__), os.path.dirname(torch.__file__)}
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            path = sysconfig.get_paths().get(key)
            if path:
                roots.add(path)
        with contextlib.suppress(AttributeError):
            roots.update(site.getsitepackages())
        with contextlib.suppress(AttributeError):
            roots.add(site.getusersitepackages())
        self._roots = tuple(
            os.path.realpath(root) + os.sep for root in roots if root and os.path.isdir(root)
        )
        self._runner = os.path.realpath(__file__)
        # the runner's companion modules (their frames show up in anomaly tracebacks)
        self._runner_folder = os.path.dirname(self._runner) + os.sep
        self._by_file: dict[str, bool] = {}
        self._by_code: dict[types.CodeType, bool] = {}

    def is_user_file(self, filename: str) -> bool:
        known = self._by_file.get(filename)
        if known is None:
            known = self._classify(filename)
            self._by_file[filename] = known
        return known

    def _classify(self, filename: str) -> bool:
        if not filename or filename.startswith("<"):
            return False
        real = os.path.realpath(filename)
        if real.startswith(self._runner_folder) or not os.path.isfile(real):
            return False
        return not real.startswith(self._roots)

    def is_user_code(self, code: types.CodeType) -> bool:
        known = self._by_code.get(code)
        if known is None:
            known = self.is_user_file(code.co_filename)
            self._by_code[code] = known
        return known

    def innermost_frame(self, frame: types.FrameType | None) -> Location | None:
        while frame is not None:
            if self.is_user_code(frame.f_code):
                return (frame.f_code.co_filename, frame.f_lineno)
            frame = frame.f_back
        return None

    def stack(self, frame: types.FrameType | None) -> tuple[Frame, ...]:
        """The user frames on the stack, innermost first."""
        found: list[Frame] = []
        while frame is not None:
            code = frame.f_code
            if self.is_user_code(code):
                found.append((code.co_filename, frame.f_lineno, code.co_name))
            frame = frame.f_back
        return tuple(found)

    def innermost_in_traceback(self, tb: types.TracebackType | None) -> Location | None:
        found: Location | None = None
        while tb is not None:
            if self.is_user_code(tb.tb_frame.f_code):
                found = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
            tb = tb.tb_next
        return found


def is_out_of_memory(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    import torch

    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "can't allocate memory" in text
        or "not enough memory" in text
        or "out of memory" in text.lower()
    )


def failure_from_exception(
    exc: BaseException, kind: str, what: str, user: UserCode, fallback: Location | None = None
) -> ProbeFailure:
    """Turn an exception raised by user code into a failure that points at the user's line."""
    where = user.innermost_in_traceback(exc.__traceback__) or fallback
    if isinstance(exc, SyntaxError) and exc.filename and user.is_user_file(exc.filename):
        where = (exc.filename, exc.lineno or 1)
        kind = "syntax"
    if isinstance(exc, SystemExit):
        kind = "exit"
        message = (
            f"{what} called sys.exit({exc.code!r}); keep script code under "
            "`if __name__ == \"__main__\":` so the model can be imported"
        )
    else:
        if is_out_of_memory(exc):
            kind = "oom"
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        message = f"{what}: {type(exc).__name__}" + (f": {detail}" if detail else "")
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return ProbeFailure(
        kind,
        message,
        file=where[0] if where else None,
        line=where[1] if where else None,
        trace=trace[-MAX_TRACEBACK_CHARS:],
    )


@contextlib.contextmanager
def user_code_phase(
    kind: str, what: str, user: UserCode, fallback: Location | None = None
) -> Iterator[None]:
    """Run user code; any exception (SystemExit included) becomes a ProbeFailure."""
    try:
        yield
    except ProbeFailure:
        raise
    except (KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - user code may raise anything, even SystemExit
        raise failure_from_exception(exc, kind, what, user, fallback) from None


# --------------------------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------------------------


@dataclass
class ProbeRequest:
    file: str
    target: str
    input: str | None = None
    device: str = "auto"
    iters: int = DEFAULT_ITERS
    warmup: int = DEFAULT_WARMUP
    threads: int | None = None
    explain: bool = False
    timing_budget_s: float = DEFAULT_TIMING_BUDGET_S
    cwd: str | None = None
    # the user's file when `file` is a copy of unsaved text: its folder and package are used
    origin: str | None = None
    memory_limit_bytes: int | None = None  # RLIMIT_AS for the probe's child (CPU only)
    batch_sweep: str | None = None  # "auto" (doubling) or "1,2,8": run the batch-size sweep
    max_memory_bytes: int | None = None  # the sweep's memory cap (default: the GPU's memory)
    init: dict[str, Any] | None = None  # keyword arguments for the model's __init__
    factory: str | None = None  # `module:function` that returns the model
    dtype: str | None = None  # convert the model (and floating inputs) to this dtype
    amp: str | None = None  # "auto", "bfloat16", "float16": forward under torch.autocast
    channels_last: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProbeRequest:
        allowed = set(cls.__dataclass_fields__)
        unknown = set(data) - allowed - {"id", "op"}
        if unknown:
            raise ProbeFailure("usage", f"unknown request fields: {sorted(unknown)}")
        fields = {k: v for k, v in data.items() if k in allowed}
        if not isinstance(fields.get("file"), str) or not isinstance(fields.get("target"), str):
            raise ProbeFailure("usage", "a request needs string fields 'file' and 'target'")
        request = cls(**fields)
        request.validate()
        return request

    def validate(self) -> None:
        if self.device not in DEVICE_CHOICES:
            raise ProbeFailure("usage", f"device must be one of {DEVICE_CHOICES}: {self.device!r}")
        if not isinstance(self.iters, int) or not 1 <= self.iters <= 10_000:
            raise ProbeFailure("usage", f"iters must be an integer from 1 to 10000: {self.iters!r}")
        if not isinstance(self.warmup, int) or not 0 <= self.warmup <= 1000:
            raise ProbeFailure("usage", f"warmup must be an integer, 0 to 1000: {self.warmup!r}")
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise ProbeFailure("usage", f"threads must be a positive integer: {self.threads!r}")
        if not isinstance(self.timing_budget_s, (int, float)) or self.timing_budget_s <= 0:
            raise ProbeFailure("usage", "timing_budget_s must be a positive number")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", self.target):
            raise ProbeFailure("usage", f"target must be a class or function name: {self.target!r}")
        if self.input is not None:
            parse_input_spec(self.input)
        if self.origin is not None and not isinstance(self.origin, str):
            raise ProbeFailure("usage", f"origin must be a path: {self.origin!r}")
        limit = self.memory_limit_bytes
        if limit is not None and (type(limit) is not int or limit < 1):
            raise ProbeFailure("usage", f"memory_limit_bytes must be a positive integer: {limit!r}")
        self.validate_sweep()
        self.validate_construction()

    def validate_sweep(self) -> None:
        cap = self.max_memory_bytes
        if cap is not None and (type(cap) is not int or cap < 1):
            raise ProbeFailure("usage", f"max_memory_bytes must be a positive integer: {cap!r}")
        if self.batch_sweep is not None:
            try:
                companion_module("batch_sweep").parse_sizes(str(self.batch_sweep))
            except ValueError as exc:
                raise ProbeFailure("usage", f"batch_sweep: {exc}") from None

    def validate_construction(self) -> None:
        """--init, --factory, --dtype, --amp, --channels-last (construct.py, precision.py)."""
        init_args = companion_module("init_args")
        precision = companion_module("precision")
        if self.init is not None and not isinstance(self.init, dict):
            raise ProbeFailure("usage", f"init must be a JSON object: {self.init!r}")
        if self.factory is not None:
            try:
                init_args.parse_factory(self.factory)
            except init_args.InitArgumentError as exc:
                raise ProbeFailure("usage", str(exc)) from None
            if self.init:
                raise ProbeFailure("usage", "--factory takes no --init: the factory builds it")
        if self.dtype is not None:
            try:
                self.dtype = input_spec.parse_dtype(self.dtype)
            except ValueError as exc:
                raise ProbeFailure("usage", str(exc)) from None
            if self.dtype not in precision.MODEL_DTYPES:
                raise ProbeFailure(
                    "usage", f"--dtype must be one of {', '.join(precision.MODEL_DTYPES)}"
                )
        if self.amp is not None:
            amp = self.amp if self.amp == "auto" else input_spec.DTYPE_ALIASES.get(self.amp)
            if amp not in precision.AMP_DTYPES:
                raise ProbeFailure("usage", "--amp takes bfloat16, float16 or nothing (auto)")
            self.amp = amp
        if not isinstance(self.channels_last, bool):
            raise ProbeFailure("usage", f"channels_last must be a boolean: {self.channels_last!r}")


# --------------------------------------------------------------------------------------------
# Loading the user's file and building the model
# --------------------------------------------------------------------------------------------


_load_counter = 0


def package_name_for(path: str) -> tuple[str, str] | None:
    """(sys.path root, dotted module name) when the file sits inside a package, so relative
    imports work; None for a plain script."""
    directory, filename = os.path.split(path)
    parts = [os.path.splitext(filename)[0]]
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        directory, package = os.path.split(directory)
        parts.append(package)
    if len(parts) == 1:
        return None
    return directory, ".".join(reversed(parts))


def import_user_file(path: str, user: UserCode, origin: str | None = None) -> types.ModuleType:
    """Import the file fresh under a private name: never as __main__, so a training script's
    `if __name__ == "__main__":` block does not run. When `path` is a copy of the unsaved text
    of `origin`, the copy is imported as a module of `origin`'s package, so that its relative
    imports resolve as the user's file's would."""
    global _load_counter
    _load_counter += 1
    is_copy = origin is not None and os.path.abspath(origin) != path
    package = package_name_for(os.path.abspath(origin) if is_copy and origin else path)
    what = f"importing {os.path.basename(origin if is_copy and origin else path)}"
    with user_code_phase("import", what, user, fallback=(path, 1)):
        parent = ""
        if package is not None:
            root, dotted = package
            if root not in sys.path:
                sys.path.insert(0, root)
            if not is_copy:
                return importlib.import_module(dotted)
            parent = dotted.rpartition(".")[0]
            importlib.import_module(parent)
        stem = re.sub(r"\W", "_", os.path.basename(path))
        name = f"torchdoctor_probe_{_load_counter}_{stem}"
        if parent:
            name = f"{parent}.{name}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ProbeFailure("file", f"cannot load {path} as a Python module", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    raise AssertionError("unreachable")  # pragma: no cover - the phase always raises or returns


def defined_in(obj: Any, module: types.ModuleType, path: str) -> bool:
    """True for a class or function the file itself defines (not one it imported)."""
    if isinstance(obj, types.MethodType):  # a classmethod factory, read off its class
        obj = obj.__func__
    if isinstance(obj, type):
        return getattr(obj, "__module__", None) == module.__name__
    if isinstance(obj, types.FunctionType):
        filename = obj.__code__.co_filename
        return os.path.realpath(filename) == os.path.realpath(path)
    return False


def resolve_target(module: types.ModuleType, target: str, path: str) -> Any:
    """The class or factory function `target` names. Only what the file defines can be a
    target: `os.abort` or an imported class would run code the user never asked to probe."""
    obj: Any = module
    parts = target.split(".")
    for index, part in enumerate(parts):
        if not hasattr(obj, part):
            import torch

            candidates = sorted(
                name
                for name, value in vars(module).items()
                if isinstance(value, type)
                and issubclass(value, torch.nn.Module)
                and getattr(value, "__module__", None) == module.__name__
            )
            hint = f"; nn.Module classes in the file: {', '.join(candidates)}" if candidates else ""
            raise ProbeFailure("target", f"{target!r} is not defined in {path}{hint}", path, None)
        obj = inspect_attribute(obj, part)
        last = index == len(parts) - 1
        if not defined_in(obj, module, path) or (not last and not isinstance(obj, type)):
            raise ProbeFailure(
                "target",
                f"{target!r} is not a class or factory function defined in {path}",
                path,
                None,
            )
    return obj


def inspect_attribute(owner: Any, name: str) -> Any:
    """`owner.name` without running a property or a descriptor of the user's (a target is a
    name, and looking it up must not execute anything)."""
    if isinstance(owner, types.ModuleType):
        return vars(owner)[name] if name in vars(owner) else getattr(owner, name)
    for klass in getattr(owner, "__mro__", (type(owner),)):
        if name in vars(klass):
            raw = vars(klass)[name]
            if isinstance(raw, (staticmethod, classmethod)):
                return getattr(owner, name)  # binding these runs no user code
            return raw
    return getattr(owner, name)


def definition_line(obj: Any, path: str) -> int | None:
    """Line of `class X` / `def f` in the user's file, from the AST (works without inspect)."""
    try:
        tree = ast.parse(read_source(path))
    except SyntaxError:
        return None
    name = getattr(obj, "__name__", None)
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return node.lineno
    return None


def read_source(path: str) -> str:
    with tokenize.open(path) as handle:
        return handle.read()


class OriginRecorder:
    """Records where each module and parameter was created in the user's code.

    While the model is being built, nn.Module.__init__ and register_parameter are wrapped so
    that every module/parameter remembers the first user frame outside its own constructor:
    the line that says `self.conv1 = nn.Conv2d(...)` or `nn.Linear(...)` inside a Sequential.
    """

    def __init__(self, user: UserCode) -> None:
        self.user = user
        self.modules: dict[int, Location] = {}
        self.params: dict[int, Location] = {}
        self._keep_alive: list[Any] = []
        # buffers, tensor attributes and containers (build_origins.py)
        self.sites = companion_module("build_origins").BuildOrigins(user.innermost_frame)

    def _creation_site(self, obj: Any) -> Location | None:
        frame: types.FrameType | None = sys._getframe(2)
        while frame is not None:
            code = frame.f_code
            # Skip the object's own __init__ chain: we want the caller's line, not the
            # `super().__init__()` inside the class body.
            if self.user.is_user_code(code) and frame.f_locals.get("self") is not obj:
                return (code.co_filename, frame.f_lineno)
            frame = frame.f_back
        return None

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        import torch

        module_cls = torch.nn.Module
        original_init = module_cls.__init__
        original_register = module_cls.register_parameter
        recorder = self

        def recording_init(module: Any, *args: Any, **kwargs: Any) -> None:
            original_init(module, *args, **kwargs)
            where = recorder._creation_site(module)
            if where is not None:
                recorder.modules.setdefault(id(module), where)
                recorder._keep_alive.append(module)

        def recording_register(module: Any, name: str, param: Any) -> None:
            original_register(module, name, param)
            if param is not None and id(param) not in recorder.params:
                # Innermost user frame: `self.scale = nn.Parameter(...)` in the user's own
                # __init__, or the `nn.Linear(...)` line for a library layer's weight.
                where = recorder.user.innermost_frame(sys._getframe(1))
                if where is not None:
                    recorder.params[id(param)] = where
                    recorder._keep_alive.append(param)

        module_cls.__init__ = recording_init  # type: ignore[method-assign]
        module_cls.register_parameter = recording_register  # type: ignore[method-assign]
        try:
            with self.sites.recording(torch):
                yield
        finally:
            module_cls.__init__ = original_init  # type: ignore[method-assign]
            module_cls.register_parameter = original_register  # type: ignore[method-assign]

    def release(self) -> None:
        """Forget the objects that were built but are not part of the model (ids may reuse)."""
        self._keep_alive.clear()
        self.sites.release()


def build_model(
    target_obj: Any,
    target: str,
    path: str,
    user: UserCode,
    origins: OriginRecorder,
    init: dict[str, Any] | None = None,
    factory_spec: str | None = None,
) -> tuple[Any, dict[str, Any]]:
    """The model and how it was built (the report's `construction`): a `--factory`, the
    class's `example_model()`, or the class called with `--init`, the `# torchdoctor: init=`
    comment or nothing, config arguments of known libraries filled in (construct.py)."""
    import torch

    construct = companion_module("construct")
    def_line = definition_line(target_obj, path)
    factory = target_obj
    what = f"building {target}"
    given: dict[str, Any] = dict(init or {})
    method, detail = ("init", "keyword arguments from --init") if init else ("default", "")
    if factory_spec is not None:
        module_name, attribute = companion_module("init_args").parse_factory(factory_spec)
        with user_code_phase("import", f"importing the factory {factory_spec}", user):
            factory = construct.import_factory(module_name, attribute)
        method, detail, what = "factory", f"{factory_spec}()", f"{factory_spec}() raised"
    elif isinstance(target_obj, type):
        if not issubclass(target_obj, torch.nn.Module):
            raise ProbeFailure(
                "target", f"{target} is a class but not a torch.nn.Module", path, def_line
            )
        hook = getattr(target_obj, "example_model", None)
        if callable(hook) and not init:
            factory = hook
            method, detail = "example_model", f"{target}.example_model()"
            what = detail
        else:
            what = f"{target}() raised in __init__"
            if not init:
                comment = init_from_comment(path, target_obj.__name__)
                if comment is not None:
                    given, line = comment
                    method, detail = "comment", f"keyword arguments from the comment on line {line}"
    elif not callable(target_obj):
        raise ProbeFailure("target", f"{target} is neither a class nor a function", path, def_line)

    torch.manual_seed(0)
    with origins.recording(), user_code_phase("init", what, user, fallback=(path, def_line or 1)):
        if factory is target_obj and isinstance(target_obj, type):
            plan = construct.plan_arguments(target_obj, given)
            refuse_unmet_arguments(plan, target, path, def_line)
        else:
            plan = construct.ArgumentPlan(dict(given), {k: repr(v) for k, v in given.items()})
        try:
            model = construct.call_with(factory, plan)
        except TypeError as exc:
            # A TypeError raised by the call itself (no user frame below us) means the
            # constructor needs arguments we cannot invent.
            if user.innermost_in_traceback(exc.__traceback__) is None:
                raise ProbeFailure(
                    "target",
                    f"{target}() cannot be called with the arguments it was given ({exc}); "
                    + HOW_TO_PASS_ARGUMENTS,
                    path,
                    def_line,
                ) from None
            raise
    if not isinstance(model, torch.nn.Module):
        raise ProbeFailure(
            "target", f"{target}() returned {type(model).__name__}, not an nn.Module", path,
            def_line,
        )
    if not detail and plan.shown:
        detail = "defaults, with library configs built from their defaults"
    construction = {"method": method, "detail": detail or "no arguments", "arguments": plan.shown}
    return model, construction


HOW_TO_PASS_ARGUMENTS = (
    "pass them with --init '{\"name\": value}', a `# torchdoctor: init={...}` comment on or "
    "above the class line, --factory module:function, or a `@classmethod example_model(cls)`"
)


def refuse_unmet_arguments(plan: Any, target: str, path: str, def_line: int | None) -> None:
    if plan.unknown:
        raise ProbeFailure(
            "target",
            f"{target}.__init__ takes no argument named {', '.join(map(repr, plan.unknown))}",
            path,
            def_line,
        )
    if plan.missing:
        raise ProbeFailure(
            "target",
            f"{target}() needs arguments it has no defaults for: {', '.join(plan.missing)}; "
            + HOW_TO_PASS_ARGUMENTS,
            path,
            def_line,
        )


def init_from_comment(path: str, class_name: str) -> tuple[dict[str, Any], int] | None:
    init_args = companion_module("init_args")
    try:
        source = read_source(path)
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    try:
        found = init_args.init_comment(source, class_name)
    except init_args.InitArgumentError as exc:
        raise ProbeFailure("target", str(exc), path, exc.line) from None
    return (found.arguments, found.line) if found is not None else None


# --------------------------------------------------------------------------------------------
# Example inputs
# --------------------------------------------------------------------------------------------

def companion_module(name: str) -> types.ModuleType:
    """A module shipped next to this file (COMPANION_MODULES), loaded by path under a private
    name: this folder is not on sys.path (see forget_runner_directory), and a user's own
    `input_spec.py` must neither shadow it nor be shadowed by it."""
    key = f"_torchdoctor_runner_{name}"
    loaded = sys.modules.get(key)
    if loaded is not None:
        return loaded
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(key, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a broken install
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


# Copied out of the package, the runner needs these files next to it (all standard library).
COMPANION_MODULES = ("input_spec", "init_args", "construct", "precision", "transformers_inputs")
COMPANION_MODULES += ("line_shapes", "batch_sweep")  # shapes by line, batch-size sweep
COMPANION_MODULES += (  # errors at the user's line, imports, runtime findings
    "import_roots", "pass_outcomes", "backward_origin", "view_layout", "build_origins",
    "unregistered_modules",
)
COMPANION_MODULES += ("units",)  # measurements as text, the same as the CLI's and the editor's
input_spec = companion_module("input_spec")
TensorSpec = input_spec.TensorSpec
# The precision every forward/backward of the running probe follows (set by apply_precision;
# each probe runs in a child of its own, so one probe's plan never reaches another's).
_precision: Any = companion_module("precision").PrecisionPlan(None, "model", None, False, "cpu")


def parse_input_spec(text: str) -> Any:
    """The --input grammar (input_spec.py): a CallSpec of positional and keyword values."""
    try:
        return input_spec.parse_call(text)
    except input_spec.InputSpecError as exc:
        raise ProbeFailure("usage", str(exc)) from None


def spec_text(specs: Iterable[Any]) -> str:
    return "; ".join(spec.text() for spec in specs)


def integer_high(model: Any) -> int:
    """Upper bound for random integer inputs: valid indices for every Embedding."""
    import torch

    sizes = [
        m.num_embeddings
        for m in model.modules()
        if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag))
    ]
    return min(sizes) if sizes else 2


def make_tensor(spec: Any, device: Any, high: int) -> Any:
    """Random values for a TensorSpec: its own range when it has one; else integers below
    `high`, floats from randn, bools all False."""
    import torch

    dtype = getattr(torch, spec.dtype)
    if spec.low is not None and spec.high is not None:
        if dtype.is_floating_point:
            values = torch.rand(spec.shape, device=device) * (spec.high - spec.low) + spec.low
            return values.to(dtype)
        return torch.randint(int(spec.low), int(spec.high), spec.shape, dtype=dtype, device=device)
    if spec.dtype == "bool":
        # All False: a padding mask that masks nothing (random masks can blank whole rows).
        return torch.zeros(spec.shape, dtype=dtype, device=device)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(spec.shape, dtype=dtype, device=device)
    return torch.randint(0, max(high, 1), spec.shape, dtype=dtype, device=device)


def materialize(value: Any, device: Any, high: int) -> Any:
    """Tensors for every TensorSpec inside a spec value; containers and constants kept."""
    if isinstance(value, TensorSpec):
        return make_tensor(value, device, high)
    if isinstance(value, tuple):
        return tuple(materialize(v, device, high) for v in value)
    if isinstance(value, list):
        return [materialize(v, device, high) for v in value]
    if isinstance(value, dict):
        return {k: materialize(v, device, high) for k, v in value.items()}
    return value


def chosen_from_spec(call: Any, high: int, source: str, detail: str) -> ChosenInput:
    args = materialize(call.args, "cpu", high)
    kwargs = materialize(call.kwargs, "cpu", high)
    return ChosenInput(args, kwargs, source, detail, call.text())


@dataclass
class ChosenInput:
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    source: str
    detail: str
    spec: str | None = None

    def to(self, device: Any) -> ChosenInput:
        return ChosenInput(
            move_to(self.args, device), move_to(self.kwargs, device), self.source, self.detail,
            self.spec,
        )


def move_to(value: Any, device: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple):
        return tuple(move_to(v, device) for v in value)
    if isinstance(value, list):
        return [move_to(v, device) for v in value]
    if isinstance(value, dict):
        return {k: move_to(v, device) for k, v in value.items()}
    return value


def as_call_arguments(value: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Example inputs follow Lightning/torch.export: a tuple is positional arguments, a dict is
    keyword arguments, anything else is the single argument."""
    if isinstance(value, tuple):
        return value, {}
    if isinstance(value, dict):
        return (), dict(value)
    return (value,), {}


def explicit_example(model: Any, module: types.ModuleType) -> tuple[Any, str] | None:
    """An input the code provides itself, in the documented order."""
    for owner, owner_name in ((model, type(model).__name__), (module, "the file")):
        for name in ("example_input", "example_inputs"):
            hook = getattr(owner, name, None) if owner is model else vars(owner).get(name)
            if hook is None:
                continue
            value = hook() if callable(hook) else hook
            return value, f"{name} of {owner_name}"
    array = getattr(model, "example_input_array", None)
    if array is not None:
        return array, f"example_input_array of {type(model).__name__} (Lightning)"
    with contextlib.suppress(Exception):
        # A transformers model whose inputs its config describes gets those (inferred, at
        # the probe's batch and sequence, with a mask): its dummy_inputs are 3 x 5 ids.
        known = companion_module("transformers_inputs").transformers_inputs(model, 1)
        dummy = getattr(model, "dummy_inputs", None) if known is None else None
        if isinstance(dummy, dict) and dummy:
            return dummy, f"dummy_inputs of {type(model).__name__} (Hugging Face)"
    return None


_COMMENT = re.compile(r"#\s*torchdoctor:\s*input\s*=\s*(.+?)\s*$")


def comment_input(path: str, class_name: str | None) -> tuple[str, int] | None:
    """A `# torchdoctor: input=(...)` comment: one inside the class (or right above it) wins
    over one elsewhere in the file. Returns the spec text and its line."""
    try:
        source = read_source(path)
        tree = ast.parse(source)
    except (SyntaxError, OSError, UnicodeDecodeError):
        return None
    comments: list[tuple[int, str]] = []
    with contextlib.suppress(tokenize.TokenError):
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                match = _COMMENT.match(token.string)
                if match:
                    comments.append((token.start[0], match.group(1)))
    if not comments:
        return None
    spans: dict[str, tuple[int, int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            spans[node.name] = (first, node.end_lineno or node.lineno)
    lines = source.splitlines()

    def belongs_to(line: int, span: tuple[int, int]) -> bool:
        first, last = span
        if first <= line <= last:
            return True
        # Comment lines directly above the class (or its decorators) belong to it.
        return line < first and all(
            lines[i - 1].strip().startswith("#") for i in range(line, first)
        )

    if class_name in spans:
        for line, text in comments:
            if belongs_to(line, spans[class_name]):
                return text, line
    for line, text in comments:
        if not any(belongs_to(line, span) for span in spans.values()):
            return text, line
    return None


def evaluation_order(node: ast.AST) -> Iterator[ast.AST]:
    """Nodes in the order Python evaluates them: a call comes after its arguments, an
    assignment's value before its targets; nested function bodies are skipped."""
    if isinstance(node, ast.Call):
        yield from evaluation_order(node.func)
        for arg in node.args:
            yield from evaluation_order(arg)
        for keyword in node.keywords:
            yield from evaluation_order(keyword.value)
        yield node
    elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        if node.value is not None:
            yield from evaluation_order(node.value)
    elif isinstance(node, ast.For):
        yield from evaluation_order(node.iter)
        yield node
        for statement in [*node.body, *node.orelse]:
            yield from evaluation_order(statement)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
        return
    else:
        for child in ast.iter_child_nodes(node):
            yield from evaluation_order(child)


def function_ast(function: Any) -> ast.FunctionDef | None:
    import inspect

    try:
        source = textwrap.dedent(inspect.getsource(function))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    first = tree.body[0] if tree.body else None
    return first if isinstance(first, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def resolve_self_expression(node: ast.AST, owner: Any, aliases: dict[str, Any]) -> Any:
    """Value of `self.a.b[0]` (or a loop variable over a module container), else None."""
    if isinstance(node, ast.Name):
        if node.id == "self":
            return owner
        return aliases.get(node.id)
    if isinstance(node, ast.Attribute):
        base = resolve_self_expression(node.value, owner, aliases)
        return getattr(base, node.attr, None) if base is not None else None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        base = resolve_self_expression(node.value, owner, aliases)
        with contextlib.suppress(Exception):
            return base[node.slice.value] if base is not None else None
    return None


def first_child(container: Any) -> Any:
    children = list(container.children())
    return children[0] if children else None


def modules_in_call_order(owner: Any, depth: int = 0) -> Iterator[Any]:
    """Leaf-ish modules in the order `owner.forward` calls them (best effort, from the AST)."""
    import torch

    if depth > 12:
        return
    containers = (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict)
    if isinstance(owner, containers):
        for child in owner.children():
            yield from expand_module(child, depth + 1)
        return
    tree = function_ast(type(owner).forward) if isinstance(owner, torch.nn.Module) else None
    if tree is None:
        return
    yield from modules_called_in(tree, owner, depth)


def modules_called_in(tree: ast.AST, owner: Any, depth: int) -> Iterator[Any]:
    import torch

    aliases: dict[str, Any] = {}
    for node in evaluation_order(tree):
        if isinstance(node, ast.For):
            iterable = node.iter
            target = node.target
            if (
                isinstance(iterable, ast.Call)
                and isinstance(iterable.func, ast.Name)
                and iterable.func.id == "enumerate"
                and iterable.args
                and isinstance(target, ast.Tuple)
                and len(target.elts) == 2
            ):
                iterable, target = iterable.args[0], target.elts[1]
            container = resolve_self_expression(iterable, owner, aliases)
            if isinstance(target, ast.Name) and isinstance(container, torch.nn.Module):
                aliases[target.id] = first_child(container)
            continue
        if not isinstance(node, ast.Call):
            continue
        called = resolve_self_expression(node.func, owner, aliases)
        if isinstance(called, torch.nn.Module):
            yield from expand_module(called, depth + 1)
        elif isinstance(called, types.MethodType) and called.__self__ is owner:
            method_tree = function_ast(called.__func__)
            if method_tree is not None:
                yield from modules_called_in(method_tree, owner, depth + 1)


def expand_module(module: Any, depth: int) -> Iterator[Any]:
    if input_candidates(module, 1):
        yield module
        return
    inner = list(modules_in_call_order(module, depth))
    if inner:
        yield from inner
        return
    for child in module.children():
        yield from expand_module(child, depth + 1)


def input_candidates(layer: Any, batch: int) -> list[tuple[list[TensorSpec], str]]:
    """Shapes a layer accepts as the model's first input, most likely first (e.g. Linear →
    (B, in_features), Conv2d → (B, C, 224, 224), Embedding → (B, T) int64)."""
    from torch import nn

    b = batch
    name = type(layer).__name__
    if isinstance(layer, nn.modules.conv._ConvNd):
        c = layer.in_channels
        dims = len(layer.kernel_size)
        if dims == 1:
            sizes: list[tuple[int, ...]] = [(128,), (1024,), (16,)]
        elif dims == 2:
            sizes = [(224, 224), (32, 32), (28, 28), (64, 64)]
        else:
            sizes = [(16, 112, 112), (8, 32, 32)]
        return [([TensorSpec((b, c, *s))], f"{name}(in_channels={c})") for s in sizes]
    if isinstance(layer, (nn.Embedding, nn.EmbeddingBag)):
        # Token ids below this layer's own size (a position table elsewhere may be smaller).
        size = layer.num_embeddings
        return [
            ([TensorSpec((b, t), "int64", 0, size)], f"{name}(num_embeddings={size})")
            for t in (16, 128)
        ]
    if isinstance(layer, nn.RNNBase):
        f, t = layer.input_size, 16
        shape = (b, t, f) if layer.batch_first else (t, b, f)
        return [([TensorSpec(shape)], f"{name}(input_size={f}, batch_first={layer.batch_first})")]
    if isinstance(layer, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
        d = layer.self_attn.embed_dim
        first = getattr(layer.self_attn, "batch_first", False)
        shape = (b, 16, d) if first else (16, b, d)
        specs = [TensorSpec(shape)] * (2 if isinstance(layer, nn.TransformerDecoderLayer) else 1)
        return [(specs, f"{name}(d_model={d}, batch_first={first})")]
    if isinstance(layer, (nn.TransformerEncoder, nn.TransformerDecoder)) and len(layer.layers):
        return input_candidates(layer.layers[0], batch)
    if isinstance(layer, nn.MultiheadAttention):
        e = layer.embed_dim
        shape = (b, 16, e) if layer.batch_first else (16, b, e)
        return [([TensorSpec(shape)] * 3, f"{name}(embed_dim={e})")]
    if isinstance(layer, nn.Linear):
        f = layer.in_features
        return [
            ([TensorSpec((b, f))], f"Linear(in_features={f})"),
            ([TensorSpec((b, 16, f))], f"Linear(in_features={f}) over a sequence"),
        ]
    if isinstance(layer, nn.modules.batchnorm._BatchNorm):
        c = layer.num_features
        if isinstance(layer, nn.BatchNorm1d):
            shapes: list[tuple[int, ...]] = [(b, c), (b, c, 16)]
        elif isinstance(layer, nn.BatchNorm2d):
            shapes = [(b, c, 224, 224), (b, c, 32, 32)]
        else:
            shapes = [(b, c, 16, 32, 32)]
        return [([TensorSpec(s)], f"{name}(num_features={c})") for s in shapes]
    if isinstance(layer, nn.LayerNorm):
        shape = tuple(layer.normalized_shape)
        return [
            ([TensorSpec((b, 16, *shape))], f"LayerNorm({list(shape)})"),
            ([TensorSpec((b, *shape))], f"LayerNorm({list(shape)})"),
        ]
    if isinstance(layer, nn.GroupNorm):
        c = layer.num_channels
        return [([TensorSpec((b, c, 32, 32))], f"GroupNorm(num_channels={c})")]
    return []


@contextlib.contextmanager
def parameters_on_meta(model: Any) -> Iterator[None]:
    """Swap every parameter/buffer for a meta tensor of the same shape for the duration:
    shape-checks a candidate input with no compute and no memory. (torch.func.functional_call
    would do the same but imports dynamo on first use, ~2 s.)"""
    import torch

    saved: list[tuple[dict[str, Any], str, Any]] = []
    replacements: dict[int, Any] = {}
    for module in model.modules():
        for table in (module._parameters, module._buffers):
            for name, tensor in list(table.items()):
                if tensor is None:
                    continue
                replacement = replacements.get(id(tensor))
                if replacement is None:
                    meta = torch.empty_like(tensor, device="meta")
                    if isinstance(tensor, torch.nn.Parameter):
                        meta = torch.nn.Parameter(meta, requires_grad=tensor.requires_grad)
                    replacement = replacements[id(tensor)] = meta
                saved.append((table, name, tensor))
                table[name] = replacement
    try:
        yield
    finally:
        for table, name, tensor in saved:
            table[name] = tensor


def try_input(model: Any, specs: list[TensorSpec], device: Any, high: int) -> BaseException | None:
    import torch

    args = tuple(make_tensor(spec, device, high) for spec in specs)
    try:
        with torch.no_grad(), contextlib.redirect_stdout(sys.stderr):
            if str(device) == "meta":
                with parameters_on_meta(model):
                    model(*args)
            else:
                model(*args)
    except (KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a failing candidate is an expected outcome
        return exc
    return None


def infer_transformers_input(model: Any) -> ChosenInput | None:
    """Keyword inputs a transformers model's config describes (transformers_inputs.py),
    verified like a layer's candidates; None when they do not apply or do not fit."""
    import torch

    keyword_inputs = companion_module("transformers_inputs")
    for device, batch, how in (
        (torch.device("meta"), INFERRED_BATCH, "verified on the meta device"),
        (torch.device("cpu"), FALLBACK_BATCH, "verified by a CPU run at batch 2"),
    ):
        found = keyword_inputs.transformers_inputs(model, batch)
        if found is None:
            return None
        tensors, detail = found
        call = input_spec.CallSpec(
            (), {t.name: TensorSpec(t.shape, t.dtype, t.low, t.high) for t in tensors}
        )
        kwargs = materialize(call.kwargs, device, 2)
        if try_call(model, (), kwargs, device) is None:
            chosen = chosen_from_spec(call, 2, "inferred", "")
            chosen.detail = f"{detail} -> {call.text()}, {how}"
            return chosen
    return None


def try_call(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], device: Any) -> Any:
    """None when forward accepts these arguments, else the exception it raised."""
    import torch

    try:
        with torch.no_grad(), contextlib.redirect_stdout(sys.stderr):
            if str(device) == "meta":
                with parameters_on_meta(model):
                    model(*args, **kwargs)
            else:
                model(*args, **kwargs)
    except (KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a failing candidate is an expected outcome
        return exc
    return None


def infer_input(model: Any, path: str, user: UserCode) -> ChosenInput:
    """Guess an input from the first layer `forward` uses, verified on the meta device, then
    (if the model needs real values) on the CPU at batch 2."""
    import torch

    from_config = infer_transformers_input(model)
    if from_config is not None:
        return from_config
    ordered = list(modules_in_call_order(model))
    declared = [m for m in model.modules() if input_candidates(m, 1)]
    layers: list[Any] = []
    for layer in [*ordered, *declared]:
        if all(layer is not seen for seen in layers):
            layers.append(layer)
    if not layers:
        raise ProbeFailure(
            "input",
            f"cannot guess an input for {type(model).__name__}: its first layer is not one "
            "whose input shape is known; add `# torchdoctor: input=(8, 3, 224, 224)` above "
            "the class, an `example_input()` method, or pass --input",
            path,
            definition_line(type(model), path),
        )
    high = integer_high(model)
    first_error: BaseException | None = None
    tried: list[str] = []
    for device, batch, how in (
        (torch.device("meta"), INFERRED_BATCH, "verified on the meta device"),
        (torch.device("cpu"), FALLBACK_BATCH, "verified by a CPU run at batch 2"),
    ):
        for layer in layers[:4]:
            for specs, description in input_candidates(layer, batch):
                error = try_input(model, specs, device, high)
                tried.append(spec_text(specs))
                if error is None:
                    text = spec_text(specs)
                    tensors = tuple(make_tensor(spec, "cpu", high) for spec in specs)
                    return ChosenInput(
                        tensors, {}, "inferred",
                        f"first layer {description} -> {text}, {how}", text,
                    )
                first_error = first_error or error
    where = user.innermost_in_traceback(first_error.__traceback__) if first_error else None
    reason = f"{type(first_error).__name__}: {first_error}" if first_error else ""
    raise ProbeFailure(
        "input",
        f"no guessed input fits {type(model).__name__} (tried {', '.join(dict.fromkeys(tried))}); "
        f"first failure: {reason.splitlines()[0] if reason else 'none'}; pin one with "
        "`# torchdoctor: input=(...)`, an `example_input()` method, or --input",
        where[0] if where else path,
        where[1] if where else definition_line(type(model), path),
    )


def choose_input(
    model: Any, module: types.ModuleType, path: str, cli_spec: str | None, user: UserCode
) -> ChosenInput:
    """Explicit beats guessed: --input (asked for this run), the code's own example input,
    a `# torchdoctor: input=` comment, then inference from the first layer."""
    high = integer_high(model)
    if cli_spec is not None:
        return chosen_from_spec(parse_input_spec(cli_spec), high, "argument", "given with --input")
    with user_code_phase("input", "computing the example input", user):
        provided = explicit_example(model, module)
    if provided is not None:
        value, origin = provided
        args, kwargs = as_call_arguments(value)
        return ChosenInput(args, kwargs, "example", f"from {origin}", describe_value_spec(value))
    comment = comment_input(path, type(model).__name__)
    if comment is not None:
        text, line = comment
        try:
            call = parse_input_spec(text)
        except ProbeFailure as exc:
            raise ProbeFailure("input", exc.message, path, line) from None
        return chosen_from_spec(call, high, "comment", f"from the comment on line {line}")
    return infer_input(model, path, user)


def describe_value_spec(value: Any) -> str | None:
    """The pinnable spec of an explicit input (tensors, in tuples, lists and dicts, and plain
    constants); None when it holds anything else."""
    import torch

    def spec_of(item: Any) -> Any:
        if isinstance(item, torch.Tensor):
            return TensorSpec(tuple(item.shape), str(item.dtype).removeprefix("torch."))
        if isinstance(item, (tuple, list)):
            return type(item)(spec_of(v) for v in item)
        if isinstance(item, dict) and all(isinstance(k, str) for k in item):
            return {k: spec_of(v) for k, v in item.items()}
        if item is None or isinstance(item, (bool, int, float, str)):
            return item
        raise ValueError(type(item).__name__)

    args, kwargs = as_call_arguments(value)
    try:
        return input_spec.CallSpec(spec_of(args), spec_of(kwargs)).text()
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------
# Shared helpers for the passes
# --------------------------------------------------------------------------------------------


def iter_tensors(value: Any) -> list[Any]:
    """Every tensor inside an output: tuples, lists, dicts, dataclasses, namedtuples.
    A list, not a generator: the checker calls this for every torch call."""
    import torch

    found: list[Any] = []
    _collect_tensors(value, found, torch.Tensor)
    return found


def _collect_tensors(value: Any, found: list[Any], tensor_type: type) -> None:
    import dataclasses

    if isinstance(value, tensor_type):
        found.append(value)
    elif isinstance(value, (tuple, list)):
        for item in value:
            if isinstance(item, tensor_type):
                found.append(item)
            elif not isinstance(item, (int, float, str, bool, type(None))):
                _collect_tensors(item, found, tensor_type)
    elif isinstance(value, dict):
        for item in value.values():
            _collect_tensors(item, found, tensor_type)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for item in dataclasses.fields(value):
            _collect_tensors(getattr(value, item.name, None), found, tensor_type)


def shapes_of(value: Any) -> list[list[int]]:
    return [list(t.shape) for t in iter_tensors(value)]


def run_forward(model: Any, inputs: ChosenInput) -> Any:
    with _precision.forward_context():
        return model(*inputs.args, **inputs.kwargs)


def loss_of(output: Any) -> Any:
    """A scalar that backpropagates through every differentiable output."""
    total = None
    for tensor in iter_tensors(output):
        if tensor.requires_grad and (tensor.is_floating_point() or tensor.is_complex()):
            term = tensor.real.sum() if tensor.is_complex() else tensor.sum()
            total = term if total is None else total + term.to(total.dtype)
    return total if total is None else _precision.scale(total)


class Session:
    """Everything one probe needs while its passes run."""

    def __init__(
        self,
        request: ProbeRequest,
        model: Any,
        inputs: ChosenInput,
        device: Any,
        user: UserCode,
        origins: OriginRecorder,
        progress: Progress,
    ) -> None:
        self.request = request
        self.model = model
        self.inputs = inputs
        self.device = device
        self.user = user
        self.origins = origins
        self.progress = progress
        self.file = request.file
        self.is_cuda = device.type == "cuda"
        self.can_backward = True
        self.warnings: list[str] = []
        self.unused_parameters: list[str] = []
        self.modules_by_name = dict(model.named_modules())

    def synchronize(self) -> None:
        if self.is_cuda:
            import torch

            torch.cuda.synchronize(self.device)

    def forward(self) -> Any:
        with user_code_phase("forward", f"{type(self.model).__name__}.forward raised", self.user):
            return run_forward(self.model, self.inputs)

    def backward(self, output: Any) -> None:
        loss = loss_of(output)
        if loss is None:
            if self.can_backward:
                self.warnings.append("backward skipped: no output of forward requires grad")
            self.can_backward = False
            return
        with user_code_phase("backward", "backward through the model raised", self.user):
            loss.backward()

    def step(self) -> None:
        output = self.forward()
        if self.can_backward:
            self.backward(output)
        del output
        self.model.zero_grad(set_to_none=True)

    def module_origin(self, name: str) -> Location | None:
        """Where the submodule was created; for copies made inside a library (deepcopy in
        nn.TransformerEncoder) the nearest ancestor that was created in user code."""
        while True:
            module = self.modules_by_name.get(name)
            where = self.origins.modules.get(id(module)) if module is not None else None
            if where is not None:
                return where
            if not name:
                line = definition_line(type(self.model), self.file)
                return (self.file, line) if line else None
            name = name.rpartition(".")[0]

    def tensor_origin(self, name: str, tensor: Any) -> Location | None:
        """Where a parameter was registered, or where its owning module was created."""
        return (
            self.origins.params.get(id(tensor))
            or self.origins.sites.tensor_sites.get(id(tensor))
            or self.module_origin(name.rpartition(".")[0])
        )


# --------------------------------------------------------------------------------------------
# Pass: shapes and time per submodule (forward hooks, nothing else installed)
# --------------------------------------------------------------------------------------------


def shapes_pass(session: Session) -> list[dict[str, Any]]:
    """Output shapes and inclusive forward time per submodule, from forward hooks. Autograd
    stays on, as in the timed forward, so the times are comparable."""
    model = session.model
    records: dict[int, dict[str, Any]] = {}
    starts: dict[int, list[float]] = {}
    handles = []

    def before(module: Any, _args: Any) -> None:
        session.synchronize()
        starts.setdefault(id(module), []).append(time.perf_counter())

    def after(module: Any, _args: Any, output: Any) -> None:
        session.synchronize()
        started = starts[id(module)].pop()
        record = records.setdefault(id(module), {"calls": 0, "seconds": 0.0, "shapes": None})
        record["calls"] += 1
        record["seconds"] += time.perf_counter() - started
        record["shapes"] = shapes_of(output)

    for module in model.modules():
        handles.append(module.register_forward_pre_hook(before))
        handles.append(module.register_forward_hook(after))
    try:
        # The first run pays lazy initialisation; the second is the one reported.
        for attempt in range(2):
            records.clear()
            output = session.forward()
            del output
            session.progress.stage("shapes", "output shapes per submodule", (attempt + 1) / 2)
    finally:
        for handle in handles:
            handle.remove()

    rows = []
    for name, module in model.named_modules():
        record = records.get(id(module))
        params = list(module.parameters())
        where = session.module_origin(name)
        rows.append(
            {
                "name": name,
                "type": type(module).__name__,
                "depth": 0 if not name else name.count(".") + 1,
                "output_shapes": record["shapes"] if record else None,
                "calls": record["calls"] if record else 0,
                "forward_ms": record["seconds"] * 1000 if record else None,
                "params": sum(p.numel() for p in params),
                "trainable_params": sum(p.numel() for p in params if p.requires_grad),
                "flops": None,
                "file": where[0] if where else None,
                "line": where[1] if where else None,
            }
        )
    return rows


# --------------------------------------------------------------------------------------------
# Pass: every local's shape, line by line (the tracer lives in line_shapes.py next to this file)
# --------------------------------------------------------------------------------------------


def locals_by_line_pass(session: Session) -> dict[str, Any] | None:
    try:
        return trace_locals_by_line(session)
    except ProbeFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - the rest of the report stands without it
        session.warnings.append(f"shapes by line skipped: {type(exc).__name__}: {exc}")
        return None


def trace_locals_by_line(session: Session) -> dict[str, Any]:
    import torch

    tracer = companion_module("line_shapes")
    own_folder = os.path.dirname(os.path.realpath(__file__)) + os.sep

    def is_traced(code: types.CodeType) -> bool:
        return session.user.is_user_code(code) and not os.path.realpath(
            code.co_filename
        ).startswith(own_folder)

    def source_line(file: str, line: int) -> str:
        return linecache.getline(file, line).strip()

    return tracer.line_shapes_pass(session.forward, is_traced, torch.Tensor, source_line)


def batch_sweep_pass(session: Session) -> dict[str, Any] | None:
    """Latency and peak memory per batch size (batch_sweep.py); None, with a warning, when the
    input has no batch dimension or the model fails at another size."""
    import torch

    sweep = companion_module("batch_sweep")
    request, model, inputs = session.request, session.model, session.inputs
    batched = [t for t in iter_tensors((inputs.args, inputs.kwargs)) if t.dim() >= 1]
    if not batched:
        session.warnings.append("batch sweep skipped: no input tensor has a batch dimension")
        return None
    original = batched[0].shape[0]
    state_bytes = tensor_bytes(model.parameters()) + tensor_bytes(model.buffers())

    def make_step(batch: int) -> Callable[[], None]:
        resized = ChosenInput(
            sweep.resize_batch(inputs.args, batch, original),
            sweep.resize_batch(inputs.kwargs, batch, original),
            inputs.source, inputs.detail,
        )

        def step() -> None:
            output = run_forward(model, resized)
            loss = loss_of(output)
            if loss is not None:
                loss.backward()
            del output, loss
            model.zero_grad(set_to_none=True)

        step.input_bytes = input_bytes(resized)  # type: ignore[attr-defined]
        return step

    def peak_bytes(step: Callable[[], None], _batch: int) -> int:
        if session.is_cuda:
            return sweep.cuda_peak_bytes(step, session.device)
        return sweep.cpu_peak_bytes(step, state_bytes + step.input_bytes, cpu_allocation_peak)  # type: ignore[attr-defined]

    def release() -> None:
        if session.is_cuda:
            torch.cuda.empty_cache()

    limit = request.max_memory_bytes
    if limit is None and session.is_cuda:
        limit = torch.cuda.get_device_properties(session.device).total_memory
    plan = sweep.SweepPlan(sweep.parse_sizes(request.batch_sweep), limit)
    probes = sweep.Probes(make_step, peak_bytes, is_out_of_memory, release)
    try:
        return sweep.run_sweep(plan, probes)
    except Exception as exc:  # noqa: BLE001 - the rest of the report stands without the sweep
        session.warnings.append(f"batch sweep stopped: {type(exc).__name__}: {exc}")
        return None


# --------------------------------------------------------------------------------------------
# Pass: runtime checks (float64, non-contiguous view, NaN/Inf, parameters without grad)
# --------------------------------------------------------------------------------------------

# Metadata queries that cannot create float64 or NaN and need no line attribution.
_PASSTHROUGH_NAMES = frozenset(
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
            if name in _PASSTHROUGH_NAMES:
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

    torch.from_numpy = from_numpy
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
            sums = torch.stack([t.sum(dtype=torch.float64) for _, t in floating]).tolist()
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


def report_nonfinite_outputs(mode: Any, output: Any, collector: FindingCollector) -> None:
    """NaN/Inf that reach the model's output, reported where they first appear.

    Every op's outputs were summed (in float64, one reduction each) and nothing was read until
    now: one device sync. Walking back from the outputs through the ops that produced non-finite
    values finds the origin; an -inf attention mask that softmax absorbs is not reported.
    """
    import torch

    if not mode.sums:
        return
    values = torch.stack(mode.sums).tolist()
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


# --------------------------------------------------------------------------------------------
# Pass: FLOPs (FlopCounterMode, forward and forward+backward in one run)
# --------------------------------------------------------------------------------------------


def flops_pass(session: Session) -> tuple[int, int | None, dict[str, int]]:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        output = session.forward()
        forward_total = counter.get_total_flops()
        per_module = {
            name: sum(per_op.values()) for name, per_op in counter.get_flop_counts().items()
        }
        session.progress.stage("flops", "counted forward FLOPs", 0.5)
        total: int | None = None
        if session.can_backward:
            session.backward(output)
            total = counter.get_total_flops()
    del output
    session.model.zero_grad(set_to_none=True)
    return forward_total, total, per_module


def module_flops_by_name(per_module: dict[str, int], root_type: str) -> dict[str, int]:
    """FlopCounterMode names modules `<RootClass>.child.grandchild`; rows use `child...`."""
    by_name = {}
    for key, flops in per_module.items():
        if key == "Global":
            continue
        if key == root_type:
            by_name[""] = flops
        elif key.startswith(root_type + "."):
            by_name[key[len(root_type) + 1 :]] = flops
    return by_name


# --------------------------------------------------------------------------------------------
# Pass: timing (bare model, warm-up then N iterations)
# --------------------------------------------------------------------------------------------


def summarize(samples_ms: list[float], warmup: int) -> dict[str, Any]:
    ordered = sorted(samples_ms)
    if len(ordered) >= 4:
        quartiles = statistics.quantiles(ordered, n=4)
        iqr = quartiles[2] - quartiles[0]
    else:
        iqr = ordered[-1] - ordered[0]
    return {
        "iterations": len(ordered),
        "warmup": warmup,
        "median_ms": statistics.median(ordered),
        "min_ms": ordered[0],
        "max_ms": ordered[-1],
        "iqr_ms": iqr,
    }


def measure(
    session: Session, step: Callable[[], None], label: str, share: tuple[float, float]
) -> dict[str, Any]:
    """Time `step` `iters` times after warm-up, stopping early once the time budget is spent
    (at least 3 timed iterations). CUDA: events around each step, one sync at the end."""
    import torch

    request = session.request
    low, high = share
    for i in range(request.warmup):
        step()
        session.progress.stage("timing", f"{label}: warm-up {i + 1}/{request.warmup}", low)
    session.synchronize()
    samples: list[float] = []
    events: list[tuple[Any, Any]] = []
    started = time.perf_counter()
    for i in range(request.iters):
        if session.is_cuda:
            begin = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            begin.record()
            step()
            end.record()
            events.append((begin, end))
        else:
            t0 = time.perf_counter()
            step()
            samples.append((time.perf_counter() - t0) * 1000)
        fraction = low + (high - low) * (i + 1) / request.iters
        session.progress.stage("timing", f"{label}: {i + 1}/{request.iters}", fraction)
        spent = time.perf_counter() - started
        if i + 1 >= min(3, request.iters) and spent > request.timing_budget_s:
            break
    if session.is_cuda:
        session.synchronize()
        samples = [begin.elapsed_time(end) for begin, end in events]
    return summarize(samples, request.warmup)


def timing_pass(session: Session) -> dict[str, Any]:
    import torch

    model = session.model

    def forward_only() -> None:
        # Same state as the training step (train mode, autograd on), so that
        # forward_backward - forward is the cost of backward.
        output = run_forward(model, session.inputs)
        del output

    def training_step() -> None:
        output = run_forward(model, session.inputs)
        loss = loss_of(output)
        loss.backward()
        model.zero_grad(set_to_none=True)

    with user_code_phase("forward", f"{type(model).__name__}.forward raised", session.user):
        forward = measure(session, forward_only, "forward", (0.0, 0.4))
        both = None
        if session.can_backward:
            both = measure(session, training_step, "forward+backward", (0.4, 1.0))
    return {
        "method": "cuda_events" if session.is_cuda else "perf_counter",
        "mode": "train" if model.training else "eval",
        "grad_enabled": torch.is_grad_enabled(),
        "forward": forward,
        "forward_backward": both,
    }


# --------------------------------------------------------------------------------------------
# Pass: peak memory
# --------------------------------------------------------------------------------------------


def tensor_bytes(tensors: Iterable[Any]) -> int:
    seen: set[int] = set()
    total = 0
    for tensor in tensors:
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        total += tensor.numel() * tensor.element_size()
    return total


def input_bytes(inputs: ChosenInput) -> int:
    return tensor_bytes(iter_tensors((inputs.args, inputs.kwargs)))


def cuda_memory_pass(session: Session) -> dict[str, Any]:
    import torch

    device = session.device
    session.synchronize()
    torch.cuda.reset_peak_memory_stats(device)
    baseline = torch.cuda.memory_allocated(device)
    session.step()
    session.synchronize()
    peak = torch.cuda.max_memory_allocated(device)
    return {
        "method": "cuda_allocator",
        "baseline_bytes": baseline,
        "peak_bytes": peak,
        "activation_bytes": max(peak - baseline, 0),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(device),
    }


def cpu_allocation_peak(kineto_results: Any) -> int:
    """Highest running sum of a profile's CPU allocation records (frees are negative sizes),
    in time order: the most the profiled code held at once beyond what it started with."""
    allocations: list[tuple[int, int]] = []
    stack = list(kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        extra = node.extra_fields
        if type(extra).__name__ == "_ExtraFields_Allocation" and extra.device.type == "cpu":
            allocations.append((node.start_time_ns, extra.alloc_size))
        stack.extend(node.children)
    allocations.sort()
    running = peak = 0
    for _, size in allocations:
        running += size
        peak = max(peak, running)
    return peak


def cpu_memory_from_profile(session: Session, profiler: Any) -> dict[str, Any]:
    """Peak of the running sum of the profiler's CPU allocation records over one step,
    on top of what was allocated before it (parameters, buffers, input)."""
    peak = cpu_allocation_peak(profiler.kineto_results)
    model = session.model
    baseline = (
        tensor_bytes(model.parameters()) + tensor_bytes(model.buffers())
        + input_bytes(session.inputs)
    )
    return {
        "method": "profiler_allocations",
        "baseline_bytes": baseline,
        "peak_bytes": baseline + peak,
        "activation_bytes": peak,
        "peak_reserved_bytes": None,
    }


# --------------------------------------------------------------------------------------------
# Pass: one profiled step (top operators, time and memory per source line)
# --------------------------------------------------------------------------------------------

ANNOTATION_PREFIX = "torchdoctor#"


def make_annotate_mode(session: Session, stacks: list[tuple[Frame, ...]]) -> Any:
    from torch.autograd.profiler import record_function
    from torch.overrides import TorchFunctionMode

    user = session.user
    index_of: dict[tuple[Frame, ...], int] = {}

    class AnnotateMode(TorchFunctionMode):
        """Wraps each torch call made by user code in a profiler range named after its user
        call stack, so ops (and, through autograd sequence numbers, their backward) can be
        charged to the exact calling lines. with_stack alone gives function *def* lines."""

        def __torch_function__(
            self, func: Any, types_: Any, args: tuple[Any, ...] = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            if getattr(func, "__name__", "") in _PASSTHROUGH_NAMES:
                return func(*args, **kwargs)
            stack = user.stack(sys._getframe(1))
            if not stack:
                return func(*args, **kwargs)
            index = index_of.get(stack)
            if index is None:
                index = index_of[stack] = len(stacks)
                stacks.append(stack)
            with record_function(f"{ANNOTATION_PREFIX}{index}"):
                return func(*args, **kwargs)

    return AnnotateMode()


def descendants(event: Any) -> Iterator[Any]:
    pending = list(event.cpu_children)
    while pending:
        child = pending.pop()
        yield child
        pending.extend(child.cpu_children)


def profile_pass(session: Session) -> dict[str, Any]:
    from torch.autograd.profiler import profile

    stacks: list[tuple[Frame, ...]] = []
    mode = make_annotate_mode(session, stacks)
    use_device = "cuda" if session.is_cuda else None
    session.synchronize()
    started = time.perf_counter()
    with profile(use_kineto=True, profile_memory=True, use_device=use_device) as profiler:
        with mode:
            output = session.forward()
        if session.can_backward:
            session.backward(output)
        del output
        session.synchronize()
    step_ms = (time.perf_counter() - started) * 1000
    session.model.zero_grad(set_to_none=True)
    session.progress.stage("profile", "reading the profile", 0.5)

    memory = None if session.is_cuda else cpu_memory_from_profile(session, profiler)
    lines = lines_from_events(session, profiler.function_events, stacks)
    top_ops, op_total_ms = top_operators(profiler, session.is_cuda)
    return {
        "profiled_step_ms": step_ms,
        "op_total_ms": op_total_ms,
        "top_ops": top_ops,
        "lines": lines,
        "memory": memory,
    }


def lines_from_events(
    session: Session, events: Any, stacks: list[tuple[Frame, ...]]
) -> list[dict[str, Any]]:
    """Forward time/memory of each user line (inclusive of the lines it calls into) and the
    backward time of the autograd nodes its ops created (tied by sequence number)."""
    rows: dict[Location, dict[str, Any]] = {}
    stack_of_sequence: dict[int, int] = {}
    use_device = session.is_cuda

    def row_for(frame: Frame) -> dict[str, Any]:
        file, line, function = frame
        row = rows.get((file, line))
        if row is None:
            row = rows[(file, line)] = {
                "file": file,
                "line": line,
                "function": function,
                "code": linecache.getline(file, line).strip(),
                "calls": 0,
                "forward_ms": 0.0,
                "backward_ms": 0.0,
                "self_ms": 0.0,
                "device_ms": 0.0 if use_device else None,
                "net_alloc_bytes": 0,
                "output_shape": None,
            }
        return row

    def charge(index: int, ms: float, device_ms: float, phase: str, net_bytes: int) -> None:
        stack = stacks[index]
        for position, frame in enumerate(dict.fromkeys((f[0], f[1], f[2]) for f in stack)):
            row = row_for(frame)
            row[f"{phase}_ms"] += ms
            if use_device:
                row["device_ms"] += device_ms
            if phase == "forward":
                row["net_alloc_bytes"] += net_bytes
            if position == 0:
                row["self_ms"] += ms
                if phase == "forward":
                    row["calls"] += 1

    for event in events:
        if not event.name.startswith(ANNOTATION_PREFIX):
            continue
        index = int(event.name[len(ANNOTATION_PREFIX) :])
        for child in descendants(event):
            if child.sequence_nr >= 0:
                stack_of_sequence.setdefault(child.sequence_nr, index)
        net = event.device_memory_usage if use_device else event.cpu_memory_usage
        charge(
            index, event.cpu_time_total / 1000, event.device_time_total / 1000, "forward", net
        )
    for event in events:
        if not event.name.startswith("autograd::engine::evaluate_function"):
            continue
        index = stack_of_sequence.get(event.sequence_nr)
        if index is not None:
            charge(
                index, event.cpu_time_total / 1000, event.device_time_total / 1000, "backward", 0
            )
    # Share of the step's attributed time (host time on CPU, kernel time on CUDA): the
    # outermost line of forward is close to 1, a line inside it gets its part.
    step_total = 0.0
    for event in events:
        is_root = event.cpu_parent is None
        if is_root and event.name.startswith((ANNOTATION_PREFIX, "autograd::engine::")):
            step_total += event.device_time_total if use_device else event.cpu_time_total
    for row in rows.values():
        spent = row["device_ms"] if use_device else row["forward_ms"] + row["backward_ms"]
        row["share"] = spent * 1000 / step_total if step_total > 0 else None
    return sorted(rows.values(), key=lambda r: (r["file"], r["line"]))


def top_operators(profiler: Any, is_cuda: bool) -> tuple[list[dict[str, Any]], float]:
    averages = [
        a
        for a in profiler.key_averages()
        if not a.key.startswith(ANNOTATION_PREFIX) and not a.key.startswith("[memory]")
    ]
    total_self_us = sum(a.self_cpu_time_total for a in averages)
    total_device_us = sum(a.self_device_time_total for a in averages) if is_cuda else 0.0

    def sort_key(a: Any) -> float:
        return a.self_device_time_total if is_cuda else a.self_cpu_time_total

    rows = []
    for average in sorted(averages, key=sort_key, reverse=True)[:TOP_OPS]:
        share_base = total_device_us if is_cuda else total_self_us
        rows.append(
            {
                "name": average.key,
                "calls": average.count,
                "self_ms": average.self_cpu_time_total / 1000,
                "total_ms": average.cpu_time_total / 1000,
                "self_device_ms": average.self_device_time_total / 1000 if is_cuda else None,
                "share": sort_key(average) / share_base if share_base > 0 else None,
            }
        )
    return rows, (total_device_us if is_cuda else total_self_us) / 1000


# --------------------------------------------------------------------------------------------
# Pass: graph breaks (optional, last: importing dynamo is slow)
# --------------------------------------------------------------------------------------------


def explain_pass(session: Session) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        import torch._dynamo as dynamo

        dynamo.reset()
        with contextlib.redirect_stdout(sys.stderr):
            explained = dynamo.explain(session.model)(*session.inputs.args, **session.inputs.kwargs)
    except Exception as exc:  # noqa: BLE001 - explain failing must not lose the report
        return {
            "graph_count": None,
            "graph_break_count": None,
            "breaks": [],
            "seconds": time.perf_counter() - started,
            "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
        }
    breaks = []
    for reason in explained.break_reasons:
        where = None
        for frame in reversed(list(getattr(reason, "user_stack", []) or [])):
            if session.user.is_user_file(frame.filename):
                where = (frame.filename, frame.lineno)
                break
        breaks.append(
            {
                "reason": str(getattr(reason, "reason", reason)).strip().splitlines()[0],
                "file": where[0] if where else None,
                "line": where[1] if where else None,
            }
        )
    dynamo.reset()
    return {
        "graph_count": explained.graph_count,
        "graph_break_count": explained.graph_break_count,
        "breaks": breaks,
        "seconds": time.perf_counter() - started,
        "error": None,
    }


# --------------------------------------------------------------------------------------------
# Recommendation: DDP or FSDP
# --------------------------------------------------------------------------------------------


def distributed_recommendation(
    params: dict[str, Any],
    frozen_bytes: int,
    activation_bytes: int,
    device_memory: int | None,
    unused: list[str],
) -> dict[str, Any]:
    # Frozen parameters and buffers are only stored, not trained: their own bytes.
    states = STATE_BYTES_PER_PARAM * params["trainable"] + frozen_bytes + params["buffer_bytes"]
    total = states + activation_bytes
    state_fraction = states / device_memory if device_memory else None
    total_fraction = total / device_memory if device_memory else None
    if device_memory is None:
        strategy = "ddp"
        reason = (
            f"no GPU in this probe: {fmt_bytes(total)} per replica "
            f"({fmt_bytes(states)} model states + {fmt_bytes(activation_bytes)} activations). "
            "On a GPU: DDP while the states stay under 40% and the total under 80% of its "
            "memory; above that shard with FSDP"
        )
    elif total_fraction is not None and total_fraction > 0.8:
        strategy = "fsdp_full_shard"
        reason = (
            f"states + activations need {fmt_bytes(total)} = {fmt_share(total_fraction)} of the "
            f"device's {fmt_bytes(device_memory)}: shard parameters, gradients and optimizer "
            "state (FSDP FULL_SHARD / fully_shard)"
        )
    elif state_fraction is not None and state_fraction > 0.4:
        strategy = "fsdp_shard_grad_op"
        reason = (
            f"model states alone take {fmt_bytes(states)} = {fmt_share(state_fraction)} of the "
            f"device: shard gradients and optimizer state (FSDP SHARD_GRAD_OP, ZeRO-2)"
        )
    else:
        strategy = "ddp"
        reason = (
            f"{fmt_bytes(total)} per replica = {fmt_share(total_fraction)} of the device's "
            f"{fmt_bytes(device_memory)}: a full replica per GPU fits, DDP is simplest and "
            "fastest"
        )
    if unused:
        reason += (
            f"; {len(unused)} parameter(s) get no gradient: DDP needs "
            "find_unused_parameters=True (or remove them)"
        )
    return {
        "strategy": strategy,
        "reason": reason,
        "bytes_per_trainable_param": STATE_BYTES_PER_PARAM,
        "model_state_bytes": states,
        "activation_bytes": activation_bytes,
        "total_bytes": total,
        "device_memory_bytes": device_memory,
        "state_fraction": state_fraction,
        "total_fraction": total_fraction,
        "find_unused_parameters": bool(unused),
        "unused_parameters": unused,
    }


def fmt_bytes(value: float) -> str:
    """Bytes as the CLI and the editor print them (units.py, loaded by path beside this file)."""
    return str(companion_module("units").size(value))


def fmt_share(fraction: float) -> str:
    """A share as the CLI and the editor print it (units.py)."""
    return str(companion_module("units").percent(fraction))


# --------------------------------------------------------------------------------------------
# One probe, start to finish
# --------------------------------------------------------------------------------------------


def pick_device(requested: str) -> Any:
    import torch

    if requested == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    if requested == "cuda":
        raise ProbeFailure(
            "device",
            f"--device cuda, but torch.cuda.is_available() is False here (torch "
            f"{torch.__version__}, built with CUDA {torch.version.cuda or 'none'})",
        )
    return torch.device("cpu")


def cpu_name() -> str:
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "CPU"


def device_info(device: Any) -> dict[str, Any]:
    import torch

    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {
            "kind": "cuda",
            "name": torch.cuda.get_device_name(device),
            "index": device.index,
            "total_memory_bytes": props.total_memory,
            "capability": f"{props.major}.{props.minor}",
            "threads": torch.get_num_threads(),
        }
    total = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "kind": "cpu",
        "name": cpu_name(),
        "index": None,
        "total_memory_bytes": total,
        "capability": None,
        "threads": torch.get_num_threads(),
    }


def param_info(model: Any) -> dict[str, Any]:
    params = list(dict.fromkeys(model.parameters()))
    return {
        "total": sum(p.numel() for p in params),
        "trainable": sum(p.numel() for p in params if p.requires_grad),
        "parameter_bytes": tensor_bytes(params),
        "buffer_bytes": tensor_bytes(model.buffers()),
    }


def input_info(inputs: ChosenInput) -> dict[str, Any]:
    tensors = []

    def collect(value: Any, path: str) -> None:
        import torch

        if isinstance(value, torch.Tensor):
            tensors.append(
                {"path": path, "shape": list(value.shape),
                 "dtype": str(value.dtype).removeprefix("torch.")}
            )
        elif isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                collect(item, f"{path}[{i}]")
        elif isinstance(value, dict):
            for key, item in value.items():
                collect(item, f"{path}[{key!r}]")

    collect(inputs.args, "args")
    collect(inputs.kwargs, "kwargs")
    return {
        "source": inputs.source,
        "detail": inputs.detail,
        "spec": inputs.spec,
        "tensors": tensors,
    }


def merge_line_shapes(lines: list[dict[str, Any]], shapes: dict[Location, list[int]]) -> None:
    by_location = {(row["file"], row["line"]): row for row in lines}
    for location, shape in shapes.items():
        row = by_location.get(location)
        if row is not None:
            row["output_shape"] = shape


def apply_precision(
    request: ProbeRequest, model: Any, inputs: ChosenInput, device: Any, user: UserCode
) -> tuple[ChosenInput, Any]:
    """--dtype / --amp / --channels-last (precision.py): the model and inputs converted, and
    the plan every forward and backward of this probe follows from now on."""
    global _precision
    precision = companion_module("precision")
    given: list[str] = []
    if inputs.source in ("argument", "comment"):
        for tensor in iter_tensors((inputs.args, inputs.kwargs)):
            if tensor.is_floating_point():
                given.append(str(tensor.dtype).removeprefix("torch."))
    plan = precision.plan_precision(
        request.dtype, request.amp, request.channels_last, device, given
    )
    with user_code_phase("init", f"converting {request.target} ({plan.dtype})", user):
        precision.convert_model(model, plan)
    converted = ChosenInput(
        precision.convert_inputs(inputs.args, plan),
        precision.convert_inputs(inputs.kwargs, plan),
        inputs.source, inputs.detail, inputs.spec,
    )
    _precision = plan
    return converted, plan


def probe(request: ProbeRequest, progress: Progress) -> dict[str, Any]:
    import torch

    path = request.file
    if not os.path.isfile(path):
        raise ProbeFailure("file", f"no such file: {path}", path)
    user = UserCode()
    device = pick_device(request.device)

    limit_note = apply_memory_limit(request.memory_limit_bytes, device)
    progress.stage("load", f"importing {os.path.basename(request.origin or path)}")
    module = import_user_file(path, user, request.origin)
    progress.stage("build", f"building {request.target}")
    target_obj = resolve_target(module, request.target, path)
    origins = OriginRecorder(user)
    model, construction = build_model(
        target_obj, request.target, path, user, origins, request.init, request.factory
    )
    model.train()

    progress.stage("input", "choosing an example input")
    torch.manual_seed(0)
    inputs = choose_input(model, module, path, request.input, user)
    with user_code_phase("init", f"moving {request.target} to {device}", user):
        model.to(device)
    inputs = inputs.to(device)
    inputs, precision_plan = apply_precision(request, model, inputs, device, user)

    session = Session(request, model, inputs, device, user, origins, progress)
    if limit_note:
        session.warnings.append(limit_note)
    # what the passes measure is kept as they go: a later failure still reports it
    outcomes = progress.outcomes = companion_module("pass_outcomes").PassOutcomes()
    outcomes.keep(
        schema=SCHEMA_VERSION, file=path, target=request.target,
        torch_version=torch.__version__, python_version=platform.python_version(),
        device=device_info(device), input=input_info(inputs), params=param_info(model),
    )
    progress.stage("shapes", "output shapes per submodule")
    strays = companion_module("unregistered_modules").StrayModules(model, torch)
    with strays.watching(session.synchronize, shapes_of):
        modules = shapes_pass(session)
    modules += strays.rows(lambda stray: origins.modules.get(id(stray)))
    outcomes.keep(modules=modules)
    progress.stage("shapes", "shapes of every local, line by line", 1.0)
    locals_by_line = locals_by_line_pass(session)
    progress.stage("checks", "runtime checks")
    findings, line_shapes = checks_going_on_forward_only(session, outcomes)
    findings += strays.findings(
        origins.sites.container_sites, lambda stray: origins.modules.get(id(stray))
    )
    findings += origins.sites.float64_attribute_findings(model, torch)
    outcomes.keep(findings=findings)
    progress.stage("flops", "counting FLOPs")
    flops_forward, flops_total, per_module = flops_pass(session)
    module_flops = module_flops_by_name(per_module, type(model).__name__)
    for row in modules:
        row["flops"] = module_flops.get(row["name"])
    outcomes.keep(flops={"forward": flops_forward, "forward_backward": flops_total})
    progress.stage("timing", "timing")
    latency = timing_pass(session)
    outcomes.keep(latency=latency)
    memory = None
    if session.is_cuda:
        progress.stage("memory", "peak memory")
        memory = cuda_memory_pass(session)
        outcomes.keep(memory=memory)
    progress.stage("profile", "profiling one step")
    profiled = profile_pass(session)
    memory = memory or profiled["memory"]
    merge_line_shapes(profiled["lines"], line_shapes)
    batch_sweep = None
    if request.batch_sweep is not None:
        progress.stage("sweep", "batch-size sweep: forward+backward at growing batches")
        batch_sweep = batch_sweep_pass(session)
    graph_breaks = None
    if request.explain:
        progress.stage("explain", "looking for graph breaks (torch._dynamo.explain)")
        graph_breaks = explain_pass(session)
    progress.stage("report", "writing the report")

    params = param_info(model)
    info = device_info(device)
    memory_total = info["total_memory_bytes"] if info["kind"] == "cuda" else None
    frozen_bytes = tensor_bytes(p for p in model.parameters() if not p.requires_grad)
    origins.release()
    return {
        "schema": SCHEMA_VERSION,
        "file": path,
        "target": request.target,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "device": info,
        "input": input_info(inputs),
        "params": params,
        "modules": modules,
        "latency": latency,
        "memory": memory,
        "flops": {
            "forward": flops_forward,
            "forward_backward": flops_total,
            "counter": "torch.utils.flop_counter.FlopCounterMode",
        },
        "top_ops": profiled["top_ops"],
        "lines": profiled["lines"],
        "profiled_step_ms": profiled["profiled_step_ms"],
        "op_total_ms": profiled["op_total_ms"],
        "findings": findings,
        "line_shapes": locals_by_line,
        "batch_sweep": batch_sweep,
        "graph_breaks": graph_breaks,
        "recommendation": distributed_recommendation(
            params, frozen_bytes, memory["activation_bytes"], memory_total,
            session.unused_parameters,
        ),
        "warnings": session.warnings,
        "construction": construction,
        "precision": precision_plan.report(model),
        "failed_passes": outcomes.failed_rows(),
        "stage_seconds": progress.finish(),
    }


# --------------------------------------------------------------------------------------------
# One probe per forked child: the warm parent never runs the user's code
# --------------------------------------------------------------------------------------------
#
# The parent imports torch once and then only forks, relays and cleans up. Each probe runs in
# a fresh child forked from it, so nothing one probe leaves (threads, patched modules, changed
# globals, open files) exists in the next. The child writes its events into a pipe of its own;
# only the parent writes to the client's channel (stdout), tagging each event with the
# request's id, so a leftover of an earlier probe has no way to answer for a later one.
#
# The parent is a child subreaper (Linux): whatever the probe starts stays its descendant even
# when it double-forks or moves to a new session, and is killed with the probe. The client's
# request pipe is watched the whole time: its end of file means the client died, and the
# parent then kills the probe and exits instead of leaving it running.

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
MAX_CHILD_LINE_BYTES = 256 * 1024 * 1024
CHILD_EXIT_GRACE_S = 5.0
# Torch's CPU thread count when the parent started, before it pinned itself to one thread.
_default_threads: int | None = None
_probe_child: int | None = None  # the pid of the child running the current probe
# Without fork (Windows) a probe runs in the runner itself, with none of the isolation above.
CAN_FORK = hasattr(os, "fork")


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def pin_torch_threads() -> None:
    """GNU OpenMP cannot start threads in a child forked from a process whose thread pool is
    running (the child's first parallel region hangs): the parent keeps torch on one thread
    and each child sets the real count."""
    import torch

    global _default_threads
    _default_threads = torch.get_num_threads()
    torch.set_num_threads(1)


def _forward_stack_dump(_signum: int, _frame: Any) -> None:
    """SIGUSR1 asks for the running Python stack: the probe's, not the idle parent's."""
    if _probe_child is not None:
        with contextlib.suppress(OSError):
            os.kill(_probe_child, signal.SIGUSR1)


class RequestChannel:
    """The client's request pipe, read without buffering so it can be watched with select.
    Only a pipe is watched: started by hand with stdin from a terminal or /dev/null, the
    runner has no client whose death it could notice."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.closed = False
        self._buffer = b""
        try:
            self.watched = stat.S_ISFIFO(os.fstat(fd).st_mode)
        except OSError:
            self.watched = False

    def watch_list(self) -> list[int]:
        return [self.fd] if self.watched and not self.closed else []

    def pump(self) -> None:
        """Read what is there (call when select says it is readable)."""
        try:
            data = os.read(self.fd, 65536)
        except OSError:
            data = b""
        if data:
            self._buffer += data
        else:
            self.closed = True

    def next_line(self) -> str | None:
        """The next request line; None once the client has gone."""
        while b"\n" not in self._buffer:
            if self.closed:
                return None
            if CAN_FORK:  # Windows' select takes sockets only: there the read just blocks
                select.select([self.fd], [], [])
            self.pump()
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", errors="replace")


class ClientGone(Exception):
    """The request pipe reached end of file: nobody is waiting for this worker any more."""


def process_table() -> dict[int, tuple[int, str]]:
    """pid → (parent pid, state) of every process, from /proc."""
    table: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                status_line = handle.read()
        except OSError:
            continue
        fields = status_line.rsplit(")", 1)[-1].split()  # the name may hold spaces and ")"
        if len(fields) > 1 and fields[1].isdigit():
            table[int(entry)] = (int(fields[1]), fields[0])
    return table


def live_descendants(root: int) -> list[int]:
    """Processes below `root` that are not yet zombies."""
    children: dict[int, list[int]] = {}
    states: dict[int, str] = {}
    for pid, (parent, state) in process_table().items():
        children.setdefault(parent, []).append(pid)
        states[pid] = state
    found: list[int] = []
    queue = list(children.get(root, []))
    while queue:
        pid = queue.pop()
        if states.get(pid) not in ("Z", "X"):
            found.append(pid)
        queue.extend(children.get(pid, []))
    return found


def kill_descendants(fallback: int | None) -> None:
    """Kill everything below this process and reap it. As a subreaper this process inherits
    the orphans, so a process that double-forked or left the session is still found. A scan
    can miss a process forked while it runs, so scans repeat until one finds nothing alive.
    Without /proc only `fallback` (the probe's child) can be named."""
    me = os.getpid()
    for _ in range(400):
        targets = live_descendants(me) if os.path.isdir("/proc") else [fallback] if fallback else []
        for pid in targets:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:  # reap: no zombies
                pass
        if not targets or not os.path.isdir("/proc"):
            return
        time.sleep(0.005)


def child_status_text(status: int) -> tuple[int, str]:
    """(exit code as the client reports it, negative for a signal; its description)."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return -number, f"was killed by {name}"
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    return code, f"exited with status {code}"


def bad_line_event(line: bytes) -> dict[str, Any] | None:
    """None when `line` is an event this relay passes on, else the protocol error it becomes."""
    try:
        data = json.loads(line)
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("event") in ("progress", "result", "error"):
        return None
    preview = line[:200].decode("utf-8", errors="replace").strip()
    return ProbeFailure("protocol", f"the runner wrote a non-JSON line: {preview!r}").to_event()


class ProbeRelay:
    """Reads one probe child's events and passes them to the client until the final one."""

    def __init__(self, pid: int, read_fd: int, events: EventStream, channel: RequestChannel):
        self.pid = pid
        self.read_fd = read_fd
        self.events = events
        self.channel = channel
        self._buffer = b""

    def run(self) -> dict[str, Any]:
        """The final event. Raises ClientGone when the request pipe closes meanwhile."""
        while True:
            readable, _, _ = select.select([self.read_fd, *self.channel.watch_list()], [], [])
            if self.channel.fd in readable:
                self.channel.pump()
                if self.channel.closed:
                    raise ClientGone()
            if self.read_fd not in readable:
                continue
            data = os.read(self.read_fd, 1 << 16)
            if not data:
                return self._ended_without_answer()
            self._buffer += data
            final = self._relay_lines()
            if final is not None:
                return final
            if len(self._buffer) > MAX_CHILD_LINE_BYTES:
                message = f"the runner wrote a line longer than {MAX_CHILD_LINE_BYTES} bytes"
                return ProbeFailure("flood", message).to_event()

    def _relay_lines(self) -> dict[str, Any] | None:
        while b"\n" in self._buffer:
            line, _, self._buffer = self._buffer.partition(b"\n")
            if not line.strip():
                continue
            bad = bad_line_event(line)
            if bad is not None:
                return bad
            event = json.loads(line)
            event.pop("id", None)
            if event["event"] != "progress":
                return event
            self.events.emit(event)
        return None

    def _ended_without_answer(self) -> dict[str, Any]:
        """The child closed its event pipe: it exited (or it shut the pipe and went on)."""
        deadline = time.monotonic() + CHILD_EXIT_GRACE_S
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                code, how = child_status_text(status)
                failure = ProbeFailure("exited", f"the probe {how} before reporting a result")
                return {**failure.to_event(), "exit_code": code}
            readable, _, _ = select.select(self.channel.watch_list(), [], [], 0.01)
            if readable:
                self.channel.pump()
                if self.channel.closed:
                    raise ClientGone()
        message = "the probe closed its event pipe without reporting a result"
        return ProbeFailure("protocol", message).to_event()


def run_probe_child(
    request: ProbeRequest, event_fd: int, inherited: Iterable[int], parent: int
) -> None:
    """In the forked child: run the probe, write its events to `event_fd`, never return."""
    code = 2
    try:
        for fd in inherited:  # the client's channels belong to the parent alone
            with contextlib.suppress(OSError):
                os.close(fd)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the parent killed: the probe goes too
        if os.getppid() != parent:  # it died before the line above took effect
            return
        if hasattr(signal, "SIGUSR1"):
            signal.signal(signal.SIGUSR1, signal.SIG_DFL)
            faulthandler.register(signal.SIGUSR1, all_threads=True)
        code = 0 if run_request(request, EventStream(event_fd)) else 2
    finally:
        for stream in (sys.stdout, sys.stderr):  # the user's prints, for the stderr tail
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def supervise_probe(
    request: ProbeRequest, events: EventStream, channel: RequestChannel
) -> bool:
    """Run one probe in a fresh child and emit its final event. True when it gave a result.
    Raises ClientGone (after killing the probe) when the client went away meanwhile."""
    global _probe_child
    request.file = os.path.abspath(request.file)
    if not CAN_FORK:
        return run_request(request, events)
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()  # nothing buffered here may be written twice, by parent and child
    sys.stderr.flush()
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        events.emit(ProbeFailure("internal", f"cannot start the probe: {exc}").to_event())
        return False
    if pid == 0:
        os.close(read_fd)
        run_probe_child(request, write_fd, (events.fileno(), channel.fd), parent)
    os.close(write_fd)
    _probe_child = pid
    try:
        final = ProbeRelay(pid, read_fd, events, channel).run()
    except (BrokenPipeError, ConnectionResetError):
        raise ClientGone() from None  # the client's end of our stdout is closed
    finally:
        _probe_child = None
        os.close(read_fd)
        # before the answer: once the client has it, nothing of this probe may be running
        kill_descendants(pid)
    try:
        events.emit(final)
    except (BrokenPipeError, ConnectionResetError):
        raise ClientGone() from None
    return final.get("event") == "result"


def prepare_probe_process(request: ProbeRequest) -> None:
    """In the probe's child: where the user's code expects to run. The folder of the user's
    file (not of a copy of unsaved text) comes first on sys.path for its sibling imports, then
    the project root, as `python -m` from there would see it (import_roots.py)."""
    import torch

    origin = request.origin or request.file
    directory = os.path.dirname(os.path.abspath(origin))
    sys.path[:0] = companion_module("import_roots").import_roots(origin)
    with contextlib.suppress(OSError):
        os.chdir(request.cwd or directory)
    threads = request.threads or _default_threads
    if threads:
        torch.set_num_threads(threads)


def apply_memory_limit(limit: int | None, device: Any) -> str | None:
    """RLIMIT_AS for this probe's child on the CPU; a note when it is not applied. The CUDA
    driver reserves far more address space than it uses, so a GPU probe runs without it."""
    if not limit:
        return None
    if device.type == "cuda":
        return "the memory limit is not applied on CUDA (the driver reserves more address space)"
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, ValueError, OSError) as exc:
        return f"the memory limit could not be applied: {exc}"
    return None


def run_request(request: ProbeRequest, events: EventStream) -> bool:
    """Run one probe in this process and emit its final event. True when it gave a result."""
    import torch

    progress = Progress(events)
    prepare_probe_process(request)
    with torch.enable_grad():
        final = final_event(request, progress)
    events.emit(final)
    return final["event"] == "result"


def final_event(request: ProbeRequest, progress: Progress) -> dict[str, Any]:
    try:
        return {"event": "result", "report": probe(request, progress)}
    except ProbeFailure as failure:
        if progress.outcomes is not None:
            progress.outcomes.annotate(failure, progress.current_stage)
        return failure.to_event()
    except Exception as exc:  # noqa: BLE001 - a bug in the runner must still end the probe
        trace = traceback.format_exc()[-MAX_TRACEBACK_CHARS:]
        message = f"torchdoctor runner failed: {type(exc).__name__}: {exc}"
        return ProbeFailure("internal", message, trace=trace).to_event()


def warm_up_torch() -> None:
    """Pay torch's lazy first-use costs (meta kernels and FlopCounterMode pull in dynamo,
    about 2 s) while the worker is idle rather than inside the first probe. On the CPU only:
    a parent that initialised CUDA could not fork children that use it."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    layer = torch.nn.Linear(2, 2)
    with contextlib.suppress(Exception), FlopCounterMode(display=False):
        layer(torch.zeros(1, 2)).sum().backward()
    with contextlib.suppress(Exception), parameters_on_meta(layer):
        layer(torch.zeros(1, 2, device="meta"))


def serve_worker(events: EventStream, channel: RequestChannel) -> int:
    import torch

    started = time.perf_counter()
    warm_up_torch()
    events.emit(
        {
            "event": "ready",
            "pid": os.getpid(),
            "python": sys.executable,
            "python_version": platform.python_version(),
            "torch_version": torch.__version__,
            "warm_up_seconds": round(time.perf_counter() - started, 3),
        }
    )
    while True:
        line = channel.next_line()
        if line is None:
            return 0
        if not line.strip():
            continue
        events.request_id = None
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise ValueError("a request is a JSON object")
            events.request_id = data.get("id")
            if data.get("op") == "shutdown":
                return 0
            request = ProbeRequest.from_json(data)
        except ProbeFailure as failure:
            events.emit(failure.to_event())
            continue
        except ValueError as exc:
            events.emit(ProbeFailure("usage", f"bad request: {exc}").to_event())
            continue
        try:
            supervise_probe(request, events, channel)
        except ClientGone:
            return 0
        events.request_id = None


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="runner.py", description="Probe a PyTorch model and print JSON-lines events."
    )
    parser.add_argument("--worker", action="store_true", help="serve JSON requests on stdin")
    parser.add_argument("--file", help="the Python file that defines the model")
    parser.add_argument("--target", help="class (or zero-argument function) to probe")
    parser.add_argument("--input", help='example input, e.g. "(8, 3, 224, 224)"')
    parser.add_argument("--device", choices=DEVICE_CHOICES, default="auto")
    parser.add_argument("--iters", type=int, default=DEFAULT_ITERS)
    parser.add_argument("--warmup", type=int, default=DEFAULT_WARMUP)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--timing-budget", type=float, default=DEFAULT_TIMING_BUDGET_S)
    parser.add_argument("--explain", action="store_true", help="report torch.compile breaks")
    parser.add_argument("--cwd", default=None, help="working directory for the user's code")
    parser.add_argument(
        "--origin", default=None, help="the user's file when --file is a copy of unsaved text"
    )
    parser.add_argument(
        "--memory-limit", type=int, default=None, help="address-space limit in bytes (CPU)"
    )
    parser.add_argument("--batch-sweep", default=None, help='"auto" or sizes such as "1,2,8"')
    parser.add_argument("--max-memory", type=int, default=None, help="sweep's cap in bytes")
    parser.add_argument("--init", default=None, help="JSON object of __init__ keyword arguments")
    parser.add_argument("--factory", default=None, help="module:function that returns the model")
    parser.add_argument("--dtype", default=None, help="model dtype: bfloat16, float16, float32")
    parser.add_argument(
        "--amp", action="store_true",
        help="forward under torch.autocast (bfloat16 on CPU, float16 on CUDA)",
    )
    parser.add_argument("--amp-dtype", default=None, help="autocast dtype: bfloat16 or float16")
    parser.add_argument("--channels-last", action="store_true", help="channels-last memory format")
    return parser.parse_args(argv)


def forget_runner_directory() -> None:
    """Started as a script, Python puts this file's folder first on sys.path; the user's
    `import schema` or `import client` must not find the files next to the runner."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]


def torch_missing() -> ProbeFailure | None:
    try:
        import torch  # noqa: F401 - the import is the check
    except Exception as exc:  # noqa: BLE001 - a broken torch raises all kinds of errors
        return ProbeFailure(
            "environment",
            f"torch cannot be imported by {sys.executable}: {type(exc).__name__}: {exc}",
        )
    return None


def main(argv: list[str] | None = None) -> int:
    # SIGUSR1 dumps every thread's Python stack to stderr: the client uses it to say which
    # line was running when a probe timed out; this process passes it on to the probe's
    # child. Fatal signals dump it too.
    faulthandler.enable()
    if hasattr(signal, "SIGUSR1"):
        signal.signal(signal.SIGUSR1, _forward_stack_dump)
    forget_runner_directory()
    arguments = parse_arguments(sys.argv[1:] if argv is None else argv)
    events = take_over_stdout()
    channel = RequestChannel(take_over_stdin())
    missing = torch_missing()
    if missing is not None:
        events.emit(missing.to_event())
        return 2
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    pin_torch_threads()
    if arguments.worker:
        return serve_worker(events, channel)
    if not arguments.file or not arguments.target:
        events.emit(ProbeFailure("usage", "--file and --target are required").to_event())
        return 2
    request = ProbeRequest(
        file=arguments.file,
        target=arguments.target,
        input=arguments.input,
        device=arguments.device,
        iters=arguments.iters,
        warmup=arguments.warmup,
        threads=arguments.threads,
        explain=arguments.explain,
        timing_budget_s=arguments.timing_budget,
        cwd=arguments.cwd,
        origin=arguments.origin,
        memory_limit_bytes=arguments.memory_limit,
        batch_sweep=arguments.batch_sweep,
        max_memory_bytes=arguments.max_memory,
        factory=arguments.factory,
        dtype=arguments.dtype,
        amp=arguments.amp_dtype or ("auto" if arguments.amp else None),
        channels_last=arguments.channels_last,
    )
    try:
        if arguments.init is not None:
            request.init = companion_module("init_args").parse_init(arguments.init)
    except ValueError as exc:
        events.emit(ProbeFailure("usage", str(exc)).to_event())
        return 2
    try:
        request.validate()
    except ProbeFailure as failure:
        events.emit(failure.to_event())
        return 2
    try:
        return 0 if supervise_probe(request, events, channel) else 2
    except ClientGone:
        return 2


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    # Skip interpreter teardown: threads the user's code left running must not keep the
    # process (and the client waiting on it) alive, and torch's teardown is slow.
    os._exit(code)
