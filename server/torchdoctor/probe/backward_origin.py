"""Where a failed backward went wrong in the forward: the user's line, not autograd's engine.

Loaded by runner/ from the file next to it; it imports only the standard library and torch.

A backward error has no user frame of its own (the traceback ends in `loss.backward()` and
autograd's engine). The step is run once more, with two observers:

- `torch.autograd.detect_anomaly()` names the forward call of the node whose backward failed
  (for the in-place error, the op that *saved* the tensor, e.g. the `sigmoid`);
- a `TorchFunctionMode` notes every in-place op the forward makes (`mul_`, `+=`,
  `x[...] = ...`, `relu(inplace=True)`) with the tensor's storage, its version afterwards and
  the user's line.

"one of the variables needed for gradient computation has been modified by an inplace
operation: [torch.FloatTensor [4, 8]], which is output 0 of Sigmoid, is at version 1; expected
version 0" then names the in-place op that moved that tensor from version 0 to 1: that line
is where the user has to change the code.
"""

from __future__ import annotations

import re
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Location = tuple[str, int]

_INPLACE_ERROR = re.compile(
    r"\[(?P<type>[\w.]+) \[(?P<shape>[\d, ]*)\]\], which is output \d+ of (?P<node>\w+), "
    r"is at version (?P<now>\d+); expected version (?P<expected>\d+)"
)
_TRACE_ENTRY = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
_INPLACE_DUNDERS = frozenset(
    {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__",
     "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__",
     "__setitem__"}
)


@dataclass
class InplaceOp:
    name: str
    storage: int
    shape: tuple[int, ...]
    version_after: int
    where: Location | None


@dataclass
class MadeTensor:
    storage: int
    shape: tuple[int, ...]
    where: Location | None


@dataclass
class BackwardOrigin:
    """What the re-run found. `where` is the line to report: the in-place op when one is to
    blame, else the forward call of the node whose backward failed."""

    where: Location | None
    saved_at: Location | None = None
    """The forward call whose saved tensor was modified (anomaly detection's answer)."""
    inplace_op: str | None = None
    notes: list[str] = field(default_factory=list)


def is_inplace_name(name: str) -> bool:
    return name in _INPLACE_DUNDERS or (
        name.endswith("_") and not name.startswith("_") and name != "requires_grad_"
    )


def _storage_of(tensor: Any) -> int:
    try:
        return int(tensor.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError, AttributeError):
        return 0


def _make_recorder(torch: Any, innermost_user_frame: Callable[[Any], Location | None]) -> Any:
    from torch.overrides import TorchFunctionMode

    tensor_type = torch.Tensor

    class InplaceRecorder(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.inplace: list[InplaceOp] = []
            self.made: list[MadeTensor] = []

        def __torch_function__(
            self, func: Any, types_: Any, args: tuple[Any, ...] = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            result = func(*args, **kwargs)
            name = getattr(func, "__name__", "")
            if name in ("__get__", "size", "dim", "stride", "numel", "data_ptr", "_version"):
                return result
            where = innermost_user_frame(sys._getframe(1))
            target = args[0] if args and isinstance(args[0], tensor_type) else None
            if target is not None and is_inplace_name(name):
                self.inplace.append(
                    InplaceOp(name, _storage_of(target), tuple(target.shape),
                              int(target._version), where)
                )
            elif isinstance(result, tensor_type):
                self.made.append(MadeTensor(_storage_of(result), tuple(result.shape), where))
            return result

    return InplaceRecorder()


def _saving_line(messages: list[str], is_user_file: Callable[[str], bool]) -> Location | None:
    """The innermost user frame of anomaly detection's 'Traceback of forward call'."""
    for text in messages:
        if "Traceback of forward call" not in text:
            continue
        entries = [(m["file"], int(m["line"])) for m in _TRACE_ENTRY.finditer(text)]
        user_entries = [entry for entry in entries if is_user_file(entry[0])]
        if user_entries:
            return user_entries[-1]
    return None


def _blamed_inplace(
    error_text: str, saved_at: Location | None, recorder: Any
) -> InplaceOp | None:
    """The in-place op that bumped the saved tensor past the version backward expected."""
    match = _INPLACE_ERROR.search(error_text)
    if match is None:
        return None
    shape = tuple(int(part) for part in match["shape"].replace(" ", "").split(",") if part)
    expected = int(match["expected"])
    candidates: list[InplaceOp] = [
        op for op in recorder.inplace if op.version_after == expected + 1
    ]
    if saved_at is not None:
        storages = {
            made.storage for made in recorder.made
            if made.where == saved_at and made.shape == shape and made.storage
        }
        on_saved = [op for op in candidates if op.storage in storages]
        if on_saved:
            return on_saved[0]
    same_shape = [op for op in candidates if op.shape == shape]
    if len(same_shape) == 1:
        return same_shape[0]
    return candidates[0] if len(candidates) == 1 else None


def locate_backward_error(
    torch: Any,
    forward: Callable[[], Any],
    backward: Callable[[Any], None],
    innermost_user_frame: Callable[[Any], Location | None],
    is_user_file: Callable[[str], bool],
) -> BackwardOrigin | None:
    """Run one forward (with the in-place recorder) and its backward again under anomaly
    detection; None when the step does not fail this time."""
    recorder = _make_recorder(torch, innermost_user_frame)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autograd.detect_anomaly(check_nan=False):
                with recorder:
                    output = forward()
                backward(output)
        except Exception as exc:  # noqa: BLE001 - the error being located may be anything
            error_text = str(exc)
        else:
            return None
    messages = [str(item.message) for item in caught]
    saved_at = _saving_line(messages, is_user_file)
    blamed = _blamed_inplace(error_text, saved_at, recorder)
    if blamed is not None:
        return BackwardOrigin(blamed.where, saved_at, blamed.name)
    return BackwardOrigin(saved_at, saved_at)


def describe(origin: BackwardOrigin, error_text: str, line_text: Callable[[Location], str]) -> str:
    """The message of the failure at the user's line."""
    first = error_text.strip().splitlines()[0] if error_text.strip() else "backward failed"
    first = first.split(" Hint:")[0].rstrip(".")
    first = first.split(" raised: ", 1)[-1]  # the runner's "backward through the model raised"
    if origin.inplace_op is not None and origin.saved_at is not None:
        return (
            f"backward failed: {first}. The in-place {origin.inplace_op} here changed a tensor "
            f"that `{line_text(origin.saved_at)}` (line {origin.saved_at[1]}) saved for "
            "backward; use the out-of-place op (e.g. `y = y * 2` instead of `y.mul_(2)`) "
            "or apply it to a .clone()"
        )
    return f"backward failed: {first} (the forward call whose gradient failed)"
