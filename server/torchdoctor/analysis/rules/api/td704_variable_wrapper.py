"""TD704 variable-wrapper: `torch.autograd.Variable(x)` (a leftover from torch 0.3): it returns
`x` detached, and `volatile=True` has no effect."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Finding, Fix, Severity, called_names, rule
from .call_arguments import has_star, is_constant, keyword_named, replace_call

VARIABLE = ("torch.autograd.Variable", "torch.autograd.variable.Variable")
# Calls that create a new tensor with no autograd history.
FRESH_TENSOR_FACTORIES = frozenset(
    f"torch.{name}"
    for name in (
        "tensor",
        "as_tensor",
        "from_numpy",
        "zeros",
        "ones",
        "empty",
        "full",
        "rand",
        "randn",
        "randint",
        "arange",
        "linspace",
        "logspace",
        "eye",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "rand_like",
        "randn_like",
        "FloatTensor",
        "LongTensor",
        "DoubleTensor",
        "IntTensor",
        "ByteTensor",
        "BoolTensor",
        "Tensor",
    )
)


@rule(
    "TD704",
    "variable-wrapper",
    Severity.WARNING,
    "`torch.autograd.Variable(x)` (a leftover from torch 0.3): it returns `x` detached, and "
    "`volatile=True` has no effect.",
    fixable=True,
    # Off by default: on the ecosystem corpus every `Variable(x)` wraps data with no autograd
    # history, where the wrapper changes nothing; reported under `--select TD704` / ALL.
    enabled_by_default=False,
    spells=called_names(*VARIABLE),
)
def variable_wrapper(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.sem.calls_to(*VARIABLE):
        if len(call.args) != 1 or has_star(call):
            yield ctx.finding("TD704", call.func, _variable_message(call), None)
            continue
        yield ctx.finding("TD704", call.func, _variable_message(call), _variable_fix(ctx, call))


def _variable_message(call: ast.Call) -> str:
    if keyword_named(call, "volatile") is not None:
        return (
            '`volatile=` was removed in torch 0.4 and has no effect (torch warns "volatile was '
            'removed and now has no effect"): gradients are still recorded; use '
            "`with torch.no_grad():` around the inference code"
        )
    return (
        "`Variable(x)` is a torch 0.3 leftover: since 0.4 it only returns `x` detached from its "
        "graph (requires_grad=False unless `requires_grad=True` is passed); on data with no "
        "autograd history that changes nothing"
    )


def _variable_fix(ctx: RuleContext, call: ast.Call) -> Fix | None:
    sem = ctx.sem
    value = call.args[0]
    source = ctx.doc.source_of(value)
    requires_grad = keyword_named(call, "requires_grad")
    others = [k for k in call.keywords if k.arg not in ("requires_grad", "volatile")]
    if others:
        return None
    fresh = isinstance(value, ast.Call) and sem.call_qualname(value) in FRESH_TENSOR_FACTORIES
    wrapped = f"({source})" if _needs_parentheses(value) else source
    if requires_grad is not None:
        if is_constant(requires_grad.value, True):
            text = (
                f"{wrapped}.requires_grad_()" if fresh else f"{wrapped}.detach().requires_grad_()"
            )
            return Fix(f"Use `{text}`", (replace_call(ctx, call, text),))
        if not is_constant(requires_grad.value, False):
            return None
    if fresh:
        return Fix(f"Use `{source}`", (replace_call(ctx, call, source),))
    # `Variable(x)` is `x.detach()`: dropping the wrapper changes behaviour only when `x` has
    # autograd history, which the old code cut on purpose (or by accident).
    statement = sem.enclosing_statement(call)
    if (
        isinstance(statement, ast.Assign)
        and statement.value is call
        and len(statement.targets) == 1
        and ctx.doc.source_of(statement.targets[0]) == source
        and ctx.statement_owns_lines(statement)
    ):
        return Fix(
            f"Remove `{ctx.doc.source_of(statement)}` (a no-op unless `{source}` has a graph)",
            (ctx.delete_lines_of(statement),),
            safe=False,
        )
    return Fix(
        f"Use `{source}` (drops the implicit detach)",
        (replace_call(ctx, call, wrapped if _needs_parentheses(value) else source),),
        safe=False,
    )


def _needs_parentheses(node: ast.AST) -> bool:
    return not isinstance(
        node,
        ast.Name | ast.Attribute | ast.Call | ast.Subscript | ast.Constant | ast.List | ast.Tuple,
    )
