"""TD306 sigmoid-bce-mismatch: BCEWithLogitsLoss fed a sigmoid output (sigmoid twice), or BCELoss
fed raw logits."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Finding, Fix, Severity, rule
from .activations import (
    BINARY_CROSS_ENTROPY_NAMES,
    SHAPE_METHODS,
    LossCall,
    Origin,
    loss_calls,
    origin_of,
    remove_activation_fix,
    rename_attribute,
)


@rule(
    "TD306",
    "sigmoid-bce-mismatch",
    Severity.WARNING,
    "BCEWithLogitsLoss fed a sigmoid output (sigmoid twice), or BCELoss fed raw logits.",
    fixable=True,
    # every finding is at a call of a binary cross-entropy loss: no such loss spelt, none called
    spells=BINARY_CROSS_ENTROPY_NAMES,
)
def sigmoid_bce_mismatch(ctx: RuleContext) -> Iterator[Finding]:
    for loss in loss_calls(ctx):
        if loss.loss not in ("bce_with_logits", "bce"):
            continue
        origin = origin_of(ctx, loss.input)
        if loss.loss == "bce_with_logits":
            if origin is None or origin.kind != "sigmoid":
                continue
            where = (
                "the model's output, which ends in sigmoid,"
                if origin.from_model
                else ("a sigmoid output")
            )
            message = (
                f"BCEWithLogitsLoss is fed {where} but applies sigmoid itself: the predicted "
                "probability is squeezed into (0.5, 0.73), the loss of a negative example "
                "never falls below log(2) and the model cannot learn; pass the logits"
            )
            fix = remove_activation_fix(ctx, loss, origin, "sigmoid", "the logits")
            yield ctx.finding("TD306", loss.call, message, fix)
            continue
        if not _is_raw_logits(ctx, loss.input, origin):
            continue
        message = (
            "BCELoss expects probabilities but is fed raw logits: any value outside [0, 1] "
            'raises "RuntimeError: all elements of input should be between 0 and 1"; use '
            "`BCEWithLogitsLoss` / `binary_cross_entropy_with_logits` on the logits"
        )
        yield ctx.finding("TD306", loss.call, message, _with_logits_fix(ctx, loss))


def _is_raw_logits(ctx: RuleContext, expr: ast.expr, origin: Origin | None) -> bool:
    if origin is not None:
        return origin.kind == "logits"
    # a variable the code itself calls logits, not computed by an activation we can see
    node = expr
    while isinstance(node, ast.Subscript):
        node = node.value
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in SHAPE_METHODS
    ):
        node = node.func.value
    dotted = ctx.sem.dotted(node)
    if dotted is None:
        return False
    last = dotted.rsplit(".", 1)[-1].lower()
    return "logit" in last and "prob" not in last


def _with_logits_fix(ctx: RuleContext, loss: LossCall) -> Fix | None:
    func = loss.call.func
    if loss.functional and isinstance(func, ast.Attribute):
        return Fix(
            "Use `binary_cross_entropy_with_logits`",
            (rename_attribute(ctx, func, "binary_cross_entropy_with_logits"),),
            safe=False,
        )
    constructor = loss.inline_constructor
    if constructor is not None and isinstance(constructor.func, ast.Attribute):
        return Fix(
            "Use `BCEWithLogitsLoss`",
            (rename_attribute(ctx, constructor.func, "BCEWithLogitsLoss"),),
            safe=False,
        )
    return None
