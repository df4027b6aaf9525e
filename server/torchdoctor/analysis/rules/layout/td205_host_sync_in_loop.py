"""TD205 host-sync-in-loop: `.item()`, `.cpu()`, `.numpy()`, `.tolist()` or `print(tensor)` on
every training step."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Edit, Finding, Fix, Severity, Span, rule
from ...semantics import Loop
from ...training import training_of
from ...tree_walk import walk
from ._shared import step_loop, training_loops
from .device_evidence import syncs_on_every_step, targets_accelerator

SYNC_METHODS = ("item", "cpu", "numpy", "tolist")


@rule(
    "TD205",
    "host-sync-in-loop",
    Severity.INFORMATION,
    "`.item()`, `.cpu()`, `.numpy()`, `.tolist()` or `print(tensor)` on every training step.",
    fixable=True,
    # on real code a per-step sync is mostly a logging call whose cost the step's other work
    # hides (see the doc page): too noisy to be on by default
    enabled_by_default=False,
    # every finding is in a training loop, one around a backward() call (`training_loops`:
    # `.backward()` or `torch.autograd.backward`); without one the check stops first
    spells=("backward",),
)
def host_sync_in_loop(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    # on the CPU a sync costs nothing: speak only where the file shows an accelerator
    if not training_loops(ctx) or not targets_accelerator(sem):
        return
    for attr in SYNC_METHODS:
        for call in sem.method_calls(attr):
            if call.args and attr != "cpu":
                continue
            func = call.func
            assert isinstance(func, ast.Attribute)  # Semantics.method_calls: attribute calls
            receiver = func.value
            if attr == "cpu" and sem.kind_of(receiver) is not None:
                continue  # `model.cpu()`
            # an exact type test: the parser makes no subclasses, and a union's isinstance
            # costs more
            if type(receiver) in _LITERAL_RECEIVERS:
                continue  # a literal or a string: not a device tensor
            # the step loop before the chain: most syncs of a file are in no training step
            loop = step_loop(ctx, call)
            if loop is None or _inside_sync_chain(ctx, call):
                continue  # `x.cpu().numpy()`: reported once, at the outer call
            if syncs_on_every_step(sem, loop):
                continue
            if not _checked_right_away(ctx, call):
                text = ctx.doc.source_of(call)
                message = (
                    f"`{text}` copies a value to the host on every training step, which waits "
                    "for all queued GPU work to finish; accumulate on the device (`.detach()`) "
                    "and convert every N steps"
                )
                yield ctx.finding("TD205", call, message, _detach_fix(ctx, call, attr))
    for call in sem.calls_by_name.get("print", ()):
        loop = step_loop(ctx, call)
        if loop is None or syncs_on_every_step(sem, loop):
            continue
        shown = _printed_tensor(ctx, call, loop)
        if shown is None:
            continue
        message = (
            f"printing the tensor `{shown}` on every training step copies it to the host and "
            "waits for the GPU; print every N steps, or accumulate with `.detach()`"
        )
        yield ctx.finding("TD205", call, message)


def _checked_right_away(ctx: RuleContext, call: ast.Call) -> bool:
    """`loss_value = loss.item()` then `if not math.isfinite(loss_value): ...` in the same loop:
    the host needs the value on this step (a guard that stops training), so it cannot wait."""
    statement = ctx.sem.parent(call)
    if not (
        isinstance(statement, ast.Assign)
        and statement.value is call
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
    ):
        return False
    loops = ctx.sem.enclosing_loops(call)
    return bool(loops) and statement.targets[0].id in _names_tested_in(ctx, loops[0])


def _names_tested_in(ctx: RuleContext, loop: Loop) -> frozenset[str]:
    """The names read by the `if`/`while`/`assert` tests inside `loop`, collected once per loop."""
    cache: dict[int, frozenset[str]] = ctx.sem.derived.setdefault("layout:names-tested-in-loop", {})
    found = cache.get(id(loop))
    if found is None:
        names: set[str] = set()
        for node in walk(loop):
            if isinstance(node, ast.If | ast.While | ast.Assert) and node is not loop:
                names.update(n.id for n in walk(node.test) if isinstance(n, ast.Name))
        found = cache[id(loop)] = frozenset(names)
    return found


def _inside_sync_chain(ctx: RuleContext, call: ast.Call) -> bool:
    parent = ctx.sem.parent(call)
    if isinstance(parent, ast.Attribute) and parent.attr in SYNC_METHODS:
        grand = ctx.sem.parent(parent)
        return isinstance(grand, ast.Call) and grand.func is parent
    return False


# receivers that cannot be a device tensor
_LITERAL_RECEIVERS = frozenset({ast.Constant, ast.JoinedStr, ast.List, ast.Dict})


def _detach_fix(ctx: RuleContext, call: ast.Call, attr: str) -> Fix | None:
    """`total += loss.item()` → `total += loss.detach()` (the sum stays on the device)."""
    if attr != "item":
        return None
    statement = ctx.sem.parent(call)
    if not (
        isinstance(statement, ast.AugAssign)
        and isinstance(statement.op, ast.Add)
        and statement.value is call
    ):
        return None
    span = ctx.doc.span_of(call.func)
    dot = Span(span.end_line, span.end_col - len(attr) - 1, span.end_line, span.end_col + 1)
    return Fix(
        "Accumulate `.detach()` on the device instead of `.item()`",
        (Edit(dot, ".detach("),),
        safe=False,
    )


def _printed_tensor(ctx: RuleContext, call: ast.Call, loop: Loop) -> str | None:
    """A tensor printed whole (`print(loss)`, `print(f"{loss}")`), not via `.item()`."""
    candidates: list[ast.AST] = []
    for argument in call.args:
        if isinstance(argument, ast.JoinedStr):
            candidates.extend(v.value for v in argument.values if isinstance(v, ast.FormattedValue))
        else:
            candidates.append(argument)
    for candidate in candidates:
        if isinstance(candidate, ast.Name) and _is_loss_name(ctx, candidate, loop):
            return candidate.id
    return None


def _is_loss_name(ctx: RuleContext, name: ast.Name, loop: Loop) -> bool:
    """Back-propagated in this loop (`loss.backward()`)."""
    for backward in training_of(ctx.sem).backward_calls:
        func = backward.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == name.id
            and loop in ctx.sem.enclosing_loops(backward)
        ):
            return True
    return False
