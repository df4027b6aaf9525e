"""TD305 softmax-before-cross-entropy: cross_entropy/NLLLoss fed softmax probabilities: softmax
is applied twice, training stalls."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Edit, Finding, Fix, Severity, rule
from ...function_body import own_nodes
from ...training import function_scope
from .activations import (
    CROSS_ENTROPY_NAMES,
    SOFTMAX_NAMES,
    Origin,
    loss_calls,
    origin_of,
    remove_activation_fix,
    rename_attribute,
)
from .module_classes import nn_class_name


def _loads_of(ctx: RuleContext, name: str, scope: ast.AST) -> int:
    return sum(
        1
        for node in own_nodes(scope)
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)
    )


@rule(
    "TD305",
    "softmax-before-cross-entropy",
    Severity.WARNING,
    "cross_entropy/NLLLoss fed softmax probabilities: softmax is applied twice, training stalls.",
    fixable=True,
    # a softmax and a cross-entropy or NLL loss are both spelt somewhere in the file, or no
    # loss input can be a softmax output: the softmax (the rarer) is asked before the check
    spells=SOFTMAX_NAMES,
)
def softmax_before_cross_entropy(ctx: RuleContext) -> Iterator[Finding]:
    if not ctx.sem.spells_any(CROSS_ENTROPY_NAMES):
        return  # no cross-entropy or NLL loss is spelt: none is called
    for loss in loss_calls(ctx):
        if loss.loss not in ("cross_entropy", "nll"):
            continue
        origin = origin_of(ctx, loss.input)
        if origin is None or origin.kind != "softmax":
            continue
        where = (
            "the model's output, which ends in softmax,"
            if origin.from_model
            else ("a softmax output")
        )
        if loss.loss == "cross_entropy":
            message = (
                f"cross-entropy is fed {where} but applies log-softmax itself: it computes "
                "log_softmax(softmax(logits)), the loss can never reach 0 and the gradients "
                "shrink as the model grows confident, so training stalls; pass the logits"
            )
            fix = remove_activation_fix(ctx, loss, origin, "softmax", "the logits")
        else:
            message = (
                f"NLLLoss is fed {where}: it expects log-probabilities and computes "
                "-mean(p[target]) from probabilities, a different, bounded objective; use "
                "`log_softmax` (or pass the logits to `cross_entropy`)"
            )
            fix = _log_softmax_fix(ctx, origin)
        yield ctx.finding("TD305", loss.call, message, fix)


def _log_softmax_fix(ctx: RuleContext, origin: Origin) -> Fix | None:
    if origin.from_model or not isinstance(origin.node, ast.Call):
        return None
    if origin.hops:
        if len(origin.hops) != 1:
            return None
        name = origin.hops[0]
        scope = function_scope(ctx.sem, name)
        if _loads_of(ctx, name.id, scope) != 1:
            return None  # the probabilities are used elsewhere too
    func = origin.node.func
    sem = ctx.sem
    edit: Edit | None = None
    if isinstance(func, ast.Attribute) and func.attr == "softmax":
        edit = rename_attribute(ctx, func, "log_softmax")
    elif isinstance(func, ast.Call):
        class_name = nn_class_name(sem, func.func)
        if class_name == "Softmax" and isinstance(func.func, ast.Attribute):
            edit = rename_attribute(ctx, func.func, "LogSoftmax")
    if edit is None:
        return None
    return Fix("Use `log_softmax`", (edit,), safe=False)
