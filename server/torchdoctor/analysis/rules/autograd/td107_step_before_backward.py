"""TD107 step-before-backward: optimizer.step() runs before loss.backward() in the same
iteration."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Finding, Severity, rule
from ...semantics import position
from ...training import (
    exits_after,
    in_exclusive_branches,
    runs_every_iteration,
    step_target_name,
    training_of,
)
from ._shared import move_after_fix


@rule(
    "TD107",
    "step-before-backward",
    Severity.WARNING,
    "optimizer.step() runs before loss.backward() in the same iteration.",
    fixable=True,
    # every finding is a step with a backward() call after it in a training loop
    # (`is_backward_call`, or `torch.autograd.backward` through an attribute or an import)
    spells=("backward",),
)
def step_before_backward(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for entry in training_of(sem).training_loops:
        for step in entry.step_calls:
            # the cheapest test first (all are pure): most steps follow a backward()
            at = position(step)
            if any(position(b) < at for b in entry.backward_calls):
                continue  # a backward() before it in the iteration
            func = step.func
            assert isinstance(func, ast.Attribute)  # an optimizer step is `<x>.step(...)`
            if step.args and "scaler" not in (sem.dotted(func.value) or "").lower():
                continue  # `optimizer.step(closure)` computes its own gradients
            if not runs_every_iteration(sem, step, entry.loop, inner_loops_conditional=True):
                continue  # `if i % k == 0: opt.step()` at the top of an accumulation loop
            after = [
                b
                for b in entry.backward_calls
                if position(b) > at and not in_exclusive_branches(sem, b, step)
            ]
            if not after:
                continue
            statement = sem.enclosing_statement(step)
            if statement is not None and exits_after(sem, statement):
                continue
            target = step_target_name(step) or "optimizer"
            backward = ctx.doc.source_of(after[0])
            message = (
                f"`{target}.step()` runs before `{backward}` in this iteration: it applies the "
                "gradients left in `.grad` (none after `zero_grad()`, else the previous "
                "batch's), never this batch's; call `step()` after `backward()`"
            )
            fix = None
            if statement is not None and "scaler" not in ctx.doc.source_of(step).lower():
                fix = move_after_fix(
                    ctx, statement, after[0], f"Move `{target}.step()` after the backward pass"
                )
            yield ctx.finding("TD107", step, message, fix)
