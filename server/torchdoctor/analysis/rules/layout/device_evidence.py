"""What a file shows about the device its tensors run on, for the host-sync hint (TD205).

A host sync (`.item()`, `.cpu()`, `print(tensor)`) costs nothing on the CPU: the value is
already there. On a GPU it makes the host wait for every queued kernel, unless the step already
waits anyway: a blocking host-to-device copy (`x.to(device)` / `x.cuda()` without
`non_blocking=True`) synchronizes the stream on every call, so one more sync in the same step
only stops the next batch's loading from overlapping with the GPU's tail of work.
"""

from __future__ import annotations

import ast

from ...context import RuleContext
from ...file_facts import file_fact
from ...semantics import Loop, Semantics, ValueKind, end_position, position, starting_within
from ...training import runs_every_iteration
from ._shared import names_device_variable

ACCELERATOR_DEVICE_TYPES = ("cuda", "mps", "xpu", "xla", "hpu", "npu")
# packages whose import means the script runs on an accelerator they place tensors on
ACCELERATOR_PACKAGES = frozenset(
    {"accelerate", "lightning", "pytorch_lightning", "lightning_fabric", "deepspeed", "torch_xla"}
)
ACCELERATOR_NAMESPACES = ("torch.cuda.", "torch.mps.", "torch.xpu.", "torch.backends.cudnn.")


@file_fact("targets-accelerator")
def _targets_accelerator_fact(ctx: RuleContext) -> object:
    return targets_accelerator(ctx.sem)


def targets_accelerator(sem: Semantics) -> bool:
    """The file names an accelerator: `.cuda()`, `torch.cuda.*`, a `"cuda"`/`"mps"` device
    string, a move to a `device` variable, `device=`, or a framework that places tensors."""
    sem = sem.whole  # a fact of the file, even for a focused view
    found = sem.derived.get("device:targets-accelerator")
    if found is None:
        found = sem.derived["device:targets-accelerator"] = _scan_for_accelerator(sem)
    return bool(found)


def _scan_for_accelerator(sem: Semantics) -> bool:
    if not sem.imported_packages().isdisjoint(ACCELERATOR_PACKAGES):
        return True
    if sem.method_calls("cuda"):
        return True
    for call in sem.method_calls("to"):
        for argument in call.args:
            if _names_accelerator(sem, argument):
                return True
    for call in sem.calls:
        qualname = sem.call_qualname(call)
        if qualname is not None and qualname.startswith(ACCELERATOR_NAMESPACES):
            return True
        for keyword in call.keywords:
            if keyword.arg == "device" and _names_accelerator(sem, keyword.value):
                return True
    return any(
        isinstance(node, ast.Constant) and _is_accelerator_string(node.value)
        for node in sem.parents
    )


def _names_accelerator(sem: Semantics, node: ast.AST) -> bool:
    """`"cuda:0"`, `device`, `args.device`, `x.device`: not the constant `"cpu"`."""
    if type(node) is ast.Constant:  # exact type test: the parser makes no subclasses
        return _is_accelerator_string(node.value)
    return names_device_variable(sem, node)


def _is_accelerator_string(value: object) -> bool:
    return isinstance(value, str) and value.split(":", 1)[0] in ACCELERATOR_DEVICE_TYPES


def syncs_on_every_step(sem: Semantics, loop: Loop) -> bool:
    """The step loop copies data to the device with a blocking move on every iteration: the
    host already waits for the GPU there, so the step is synchronized once per iteration."""
    # asked only of the step loops that hold a host sync (a few per file): each is answered
    # when first asked, from the moves inside it, rather than by climbing from every move of
    # the file to the loops around it
    cache: dict[int, bool] = sem.derived.setdefault("device:syncing-loops", {})
    found = cache.get(id(loop))
    if found is None:
        found = cache[id(loop)] = _copies_blocking_every_iteration(sem, loop)
    return found


def _copies_blocking_every_iteration(sem: Semantics, loop: Loop) -> bool:
    """A blocking host-to-device copy runs on every iteration of `loop`. The moves are found by
    position among the file's (`starting_within`): one that starts in the loop's body and
    reaches the loop climbing through no branch, inner loop or function is in that body."""
    start, end = position(loop.body[0]), end_position(loop.body[-1])
    calls_by_attr = sem.calls_by_attr
    for attr in ("to", "cuda", "copy_"):
        moves = calls_by_attr.get(attr)
        if not moves:
            continue  # no search for a method most files never call (`.cuda()`, `.copy_()`)
        for call in starting_within(moves, start, end):
            if _is_blocking_copy(sem, attr, call) and runs_every_iteration(
                sem, call, loop, inner_loops_conditional=True
            ):
                return True
    return False


def _is_blocking_copy(sem: Semantics, attr: str, call: ast.Call) -> bool:
    """`x.to(device)`, `x.cuda()`, `dst.copy_(batch)` without `non_blocking=True`, and not a
    move of a model."""
    if _is_non_blocking(call):
        return False
    if attr == "to" and not (call.args and _names_accelerator(sem, call.args[0])):
        return False
    if attr == "copy_" and not call.args:
        return False  # `dst.copy_(batch)` into a device buffer: blocking as well
    func = call.func
    assert isinstance(func, ast.Attribute)  # Semantics.method_calls: attribute calls
    # moving a model is not a per-batch copy
    return sem.kind_of(func.value) is not ValueKind.MODEL


def _is_non_blocking(call: ast.Call) -> bool:
    for keyword in call.keywords:
        if keyword.arg == "non_blocking":
            return not (isinstance(keyword.value, ast.Constant) and keyword.value.value is False)
    return False
