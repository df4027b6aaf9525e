"""TD713 deprecated-loss-args: `size_average=`/`reduce=` on a loss (deprecated since torch
0.4.1): use `reduction=`."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...call_edits import remove_arguments
from ...context import RuleContext
from ...findings import Finding, Fix, Severity, rule
from .call_arguments import is_constant, keyword_named
from .symbols import LEGACY_REDUCTION_LOSSES


@rule(
    "TD713",
    "deprecated-loss-args",
    Severity.WARNING,
    "`size_average=`/`reduce=` on a loss (deprecated since torch 0.4.1): use `reduction=`.",
    fixable=True,
    spells=("size_average", "reduce"),
)
def deprecated_loss_args(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    # one set operation: most files build no loss with these arguments
    called = sem.calls_by_qualname.keys() & LEGACY_REDUCTION_LOSSES
    if not called:
        return  # nothing to sort
    for qualname in sorted(called):
        for call in sem.calls_by_qualname[qualname]:
            if not call.keywords:
                continue  # most losses are built without keywords: no list to make
            legacy = [k for k in call.keywords if k.arg in ("size_average", "reduce")]
            if not legacy:
                continue
            reduction = _legacy_reduction(legacy)
            names = " and ".join(f"`{k.arg}=`" for k in legacy)
            verb = "are" if len(legacy) > 1 else "is"
            message = (
                f"{names} on `{qualname.rsplit('.', 1)[-1]}` {verb} deprecated (torch warns "
                '"size_average and reduce args will be deprecated") and override `reduction=`'
            )
            if reduction is not None:
                message += f': use `reduction="{reduction}"`'
            fix = _legacy_reduction_fix(ctx, call, legacy, reduction)
            yield ctx.finding("TD713", legacy[0], message, fix)


def _legacy_reduction(legacy: list[ast.keyword]) -> str | None:
    """torch's own rule (torch.nn._reduction.legacy_get_string): None counts as True."""
    values: dict[str, bool] = {"size_average": True, "reduce": True}
    for keyword in legacy:
        value = keyword.value
        if is_constant(value, None):
            continue
        if not (isinstance(value, ast.Constant) and isinstance(value.value, bool)):
            return None
        assert keyword.arg is not None
        values[keyword.arg] = value.value
    if values["size_average"] and values["reduce"]:
        return "mean"
    return "sum" if values["reduce"] else "none"


def _legacy_reduction_fix(
    ctx: RuleContext, call: ast.Call, legacy: list[ast.keyword], reduction: str | None
) -> Fix | None:
    if reduction is None:
        return None
    existing = keyword_named(call, "reduction")
    edits = [ctx.replace(legacy[0], f'reduction="{reduction}"')]
    doomed: list[ast.AST] = [*legacy[1:], *([existing] if existing is not None else [])]
    if doomed:
        removals = remove_arguments(ctx, call, doomed)
        if removals is None:
            return None
        edits.extend(removals)
    spans = sorted(edit.span for edit in edits)
    if any(a.overlaps(b) for a, b in zip(spans, spans[1:], strict=False)):
        return None
    return Fix(f'Use `reduction="{reduction}"`', tuple(edits))
