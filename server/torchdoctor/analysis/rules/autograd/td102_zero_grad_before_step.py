"""TD102 zero-grad-before-step: zero_grad() runs between backward() and step(): the step sees
zero gradients."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Finding, Fix, Severity, rule
from ...semantics import ValueKind, position
from ...training import (
    TrainingLoop,
    exits_after,
    in_exclusive_branches,
    step_target_name,
    training_of,
    zeroing_receiver,
)


@rule(
    "TD102",
    "zero-grad-before-step",
    Severity.WARNING,
    "zero_grad() runs between backward() and step(): the step sees zero gradients.",
    fixable=True,
    # every finding is a zeroing after a backward() call of a training loop (`is_backward_call`,
    # or `torch.autograd.backward` called through an attribute or a name imported as it)
    spells=("backward",),
)
def zero_grad_before_step(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for entry in training_of(sem).training_loops:
        if not _may_zero_between(entry):
            continue
        events: list[tuple[tuple[int, int], str, ast.AST]] = []
        events += [(position(node), "backward", node) for node in entry.backward_calls]
        events += [(position(node), "zero", node) for node in entry.zeroing if _clears(node)]
        events += [(position(node), "step", node) for node in entry.step_calls]
        events.sort(key=lambda event: event[0])
        for index, (_, kind, zero) in enumerate(events):
            if kind != "zero":
                continue
            earlier_backward = [n for _, k, n in events[:index] if k == "backward"]
            if not earlier_backward:
                continue
            step = _next_step_without_backward(events[index + 1 :])
            if step is None or not _zeroes_what_step_applies(ctx, zero, step, entry):
                continue
            statement = sem.enclosing_statement(zero)
            if statement is None or exits_after(sem, statement):
                continue
            if in_exclusive_branches(sem, zero, step):
                continue
            backward = earlier_backward[-1]
            target = step_target_name(step) or "optimizer"
            message = (
                f"gradients are zeroed after `.backward()` and before `{target}.step()`: the "
                "step sees only zeros and the parameters never change; zero them before "
                "`.backward()`"
            )
            yield ctx.finding("TD102", zero, message, _move_before_fix(ctx, zero, backward))


def _may_zero_between(entry: TrainingLoop) -> bool:
    """Some zeroing starts between the loop's first backward() and its last step, either end
    included: what a finding needs (a zeroing with a backward() before it in the events and a
    step after, which the stable sort keeps in that order at a tie). Most loops zero before
    their backward() or after their step: they are passed over without building events."""
    if not entry.backward_calls or not entry.zeroing or not entry.step_calls:
        return False
    first_backward = min(map(position, entry.backward_calls))
    last_step = max(map(position, entry.step_calls))
    return any(first_backward <= position(node) <= last_step for node in entry.zeroing)


def _clears(node: ast.AST) -> bool:
    """A zeroing call, or `p.grad = None` / `0` / `torch.zeros_like(p)`; not `p.grad = p.grad / n`
    (averaging) nor `p.grad = g` (gradients set by hand), which the step is meant to apply."""
    if not isinstance(node, ast.Assign | ast.AnnAssign):
        return True
    value = node.value
    if isinstance(value, ast.Constant):
        return value.value is None or value.value == 0
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in ("zeros", "zeros_like")
    return False


def _next_step_without_backward(
    events: list[tuple[tuple[int, int], str, ast.AST]],
) -> ast.Call | None:
    for _, kind, node in events:
        if kind == "backward":
            return None
        if kind == "step" and isinstance(node, ast.Call):
            return node
    return None


def _zeroes_what_step_applies(
    ctx: RuleContext, zero: ast.AST, step: ast.Call, entry: TrainingLoop
) -> bool:
    receiver = zeroing_receiver(zero)
    target = step_target_name(step)
    if receiver is not None and receiver == target:
        return True
    if receiver is not None and ctx.sem.kinds.get(receiver) is ValueKind.OPTIMIZER:
        return False  # another optimizer's gradients
    # model.zero_grad() / p.grad = None: the same parameters when one optimizer trains them all
    return len(entry.optimizer_names) == 1


def _move_before_fix(ctx: RuleContext, zero: ast.AST, backward: ast.AST) -> Fix | None:
    sem = ctx.sem
    zero_statement = sem.enclosing_statement(zero)
    backward_statement = sem.enclosing_statement(backward)
    if (
        not isinstance(zero_statement, ast.Expr)
        or backward_statement is None
        or not ctx.is_single_line_statement(zero_statement)
        or not ctx.statement_owns_lines(backward_statement)
    ):
        return None
    text = ctx.doc.source_of(zero_statement)
    return Fix(
        f"Move `{text}` before the `.backward()` call",
        ctx.move_line_before(zero_statement, backward_statement),
    )
