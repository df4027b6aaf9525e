"""TD101 missing-zero-grad: A training loop calls backward() and step() but never zeroes the
gradients."""

from __future__ import annotations

from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Finding, Fix, Severity, rule
from ...training import TrainingLoop, training_of


@rule(
    "TD101",
    "missing-zero-grad",
    Severity.WARNING,
    "A training loop calls backward() and step() but never zeroes the gradients.",
    fixable=True,
    # every finding is at a backward() call of a training loop (`is_backward_call`, or
    # `torch.autograd.backward` called through an attribute or a name imported as it)
    spells=("backward",),
)
def missing_zero_grad(ctx: RuleContext) -> Iterator[Finding]:
    if ctx.sem.imports_framework_without_torch(OTHER_FRAMEWORKS):
        return
    for entry in training_of(ctx.sem).training_loops:
        if entry.zeroing or not entry.backward_calls:
            continue
        backward = entry.backward_calls[0]
        optimizer = entry.optimizer_names[0] if entry.optimizer_names else "optimizer"
        message = (
            f"gradients are never zeroed in this loop: every `.backward()` adds to `.grad`, so "
            f"`{optimizer}.step()` applies the sum of all batches so far; call "
            f"`{optimizer}.zero_grad()` once per step"
        )
        yield ctx.finding("TD101", backward, message, _insert_zero_grad_fix(ctx, entry, optimizer))


# frameworks with the same `loss.backward()` / `trainer.step()` shape whose step overwrites
# the gradients (MXNet's default grad_req="write") or that clear them another way
OTHER_FRAMEWORKS = ("mxnet", "paddle")


def _insert_zero_grad_fix(ctx: RuleContext, entry: TrainingLoop, optimizer: str) -> Fix | None:
    first = entry.loop.body[0]
    header_line = entry.loop.lineno - 1
    if ctx.doc.span_of(first).start_line == header_line:
        return None  # `for x in loader: loss.backward()` on one line: no clean place to insert
    return Fix(
        f"Insert `{optimizer}.zero_grad()` at the start of the loop body",
        (ctx.insert_line_before(first, f"{optimizer}.zero_grad()"),),
    )
