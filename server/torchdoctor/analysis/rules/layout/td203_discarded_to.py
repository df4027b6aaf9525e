"""TD203 discarded-to: `x.to(device)` / `x.cuda()` / `x.float()` as a statement on a tensor: the
result is lost."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Edit, Finding, Fix, Severity, Span, rule
from ._shared import is_tensor_expr

MOVING_OR_CASTING = (
    "to",
    "cuda",
    "cpu",
    "float",
    "half",
    "double",
    "bfloat16",
    "long",
    "int",
    "bool",
)


@rule(
    "TD203",
    "discarded-to",
    Severity.WARNING,
    "`x.to(device)` / `x.cuda()` / `x.float()` as a statement on a tensor: the result is lost.",
    fixable=True,
    # every finding is at a method call of one of MOVING_OR_CASTING (`x.to(device)`)
    spells=MOVING_OR_CASTING,
)
def discarded_to(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    # the indexes read directly, and an exact type test (the parser makes no subclasses): asked
    # of every move and cast of the file, and most are not statements
    calls_by_attr = sem.calls_by_attr
    parents = sem.parents
    for attr in MOVING_OR_CASTING:
        for call in calls_by_attr.get(attr, ()):
            statement = parents.get(call)
            if type(statement) is not ast.Expr:
                continue
            func = call.func
            assert isinstance(func, ast.Attribute)  # Semantics.method_calls: attribute calls
            receiver = func.value
            if not isinstance(receiver, ast.Name | ast.Attribute) or not _is_clear_tensor(
                ctx, receiver, call
            ):
                continue
            name = ctx.doc.source_of(receiver)
            method = ctx.doc.source_of(call)[len(name) :].lstrip()
            message = (
                f"`{name}{method}` returns a new tensor and the result is dropped: unlike a "
                f"module, a tensor is not moved or converted in place, so `{name}` is unchanged; "
                f"assign it: `{name} = {name}{method}`"
            )
            fix = Fix(
                f"Assign the result to `{name}`",
                (Edit(_start_of(ctx, call), f"{name} = "),),
            )
            yield ctx.finding("TD203", call, message, fix)


def _start_of(ctx: RuleContext, node: ast.AST) -> Span:
    span = ctx.doc.span_of(node)
    return Span(span.start_line, span.start_col, span.start_line, span.start_col)


def _is_clear_tensor(ctx: RuleContext, receiver: ast.AST, at: ast.AST) -> bool:
    """Only what is clearly a tensor: never a model, a loss module or anything of unknown kind
    (`model.to(device)` as a statement is right: modules move in place)."""
    sem = ctx.sem
    if sem.kind_of(receiver) is not None:
        return False
    dotted = sem.dotted(receiver)
    if dotted is None or dotted in ("self", "cls"):
        return False
    if dotted in sem.module_classes:
        return False
    return is_tensor_expr(ctx, receiver, at)
