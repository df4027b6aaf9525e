"""TD108 scheduler-before-optimizer: scheduler.step() runs before optimizer.step(): the first
learning-rate value is skipped."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Finding, Severity, rule
from ...semantics import ValueKind, position
from ...training import in_exclusive_branches, step_target_name, training_of
from ._shared import move_after_fix

TORCH_SCHEDULER_SOURCES = ("torch.optim.lr_scheduler.", "transformers.", "diffusers.optimization.")


@rule(
    "TD108",
    "scheduler-before-optimizer",
    Severity.WARNING,
    "scheduler.step() runs before optimizer.step(): the first learning-rate value is skipped.",
    fixable=True,
    # every finding is at a `<scheduler>.step()` call (`method_calls("step")`)
    spells=("step",),
)
def scheduler_before_optimizer(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    optimizer_steps = training_of(sem).step_calls
    if not optimizer_steps:
        return
    # by receiver: a file steps the same few optimizers and schedulers many times
    schedulers: dict[str, bool] = {}
    for call in sem.method_calls("step"):
        if call.args or call.keywords:
            continue  # `scheduler.step(val_loss)`: ReduceLROnPlateau, or the epoch argument
        func = call.func
        assert isinstance(func, ast.Attribute)  # Semantics.method_calls: attribute calls
        receiver = func.value
        dotted = sem.dotted(receiver)
        if dotted is None:
            continue
        is_scheduler = schedulers.get(dotted)
        if is_scheduler is None:
            is_scheduler = schedulers[dotted] = _is_torch_scheduler(ctx, dotted)
        if not is_scheduler:
            continue
        later = _optimizer_steps_after(ctx, call, optimizer_steps)
        if not later:
            continue
        name = dotted
        optimizer = step_target_name(later[0]) or "optimizer"
        message = (
            f'`{name}.step()` runs before `{optimizer}.step()`: torch warns "Detected call of '
            '`lr_scheduler.step()` before `optimizer.step()`" and the first learning-rate value '
            f"of the schedule is never used; call `{name}.step()` after `{optimizer}.step()`"
        )
        statement = sem.enclosing_statement(call)
        fix = None
        if statement is not None:
            fix = move_after_fix(
                ctx, statement, later[0], f"Move `{name}.step()` after `{optimizer}.step()`"
            )
        yield ctx.finding("TD108", call, message, fix)


def _is_torch_scheduler(ctx: RuleContext, dotted: str) -> bool:
    """The dotted name holds a torch LR scheduler (or one built on it), not a custom class with
    its own `step()`: a fact of the name alone."""
    values = ctx.sem.assigned_values(dotted)
    if not values:
        # a parameter or attribute set elsewhere, named like a scheduler
        return ctx.sem.kind_of_name(dotted) is ValueKind.SCHEDULER
    for value in values:
        if not isinstance(value, ast.Call):
            return False
        qualname = ctx.sem.call_qualname(value) or ""
        if not qualname.startswith(TORCH_SCHEDULER_SOURCES) or "ReduceLROnPlateau" in qualname:
            return False
        if qualname.startswith(("transformers.", "diffusers.")) and "schedul" not in qualname:
            return False
    return True


def _optimizer_steps_after(
    ctx: RuleContext, call: ast.Call, optimizer_steps: list[ast.Call]
) -> list[ast.Call]:
    """The optimizer steps later in the same iteration of the innermost loop that holds any,
    when none comes before the scheduler call in that iteration."""
    sem = ctx.sem
    structure = training_of(sem)
    for loop in sem.enclosing_loops(call):
        inside = structure.steps_in(loop)
        if not inside:
            continue
        start = position(call)
        if any(position(s) < start for s in inside):
            return []
        return [s for s in inside if not in_exclusive_branches(sem, s, call)]
    return []
