"""Telling the user's code apart from libraries: which frames are the user's, and how an
exception raised in them becomes a probe failure pointing at their line.
"""

from __future__ import annotations

import contextlib
import os
import site
import sysconfig
import traceback
import types
from collections.abc import Iterator

from .companions import PROBE_DIR
from .events import ProbeFailure

MAX_TRACEBACK_CHARS = 6000


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
        # the runner's package and its companion modules (their frames show up in anomaly
        # tracebacks)
        self._runner_folder = os.path.realpath(PROBE_DIR) + os.sep
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
