"""TD110 zero-grad-keeps-memory: `zero_grad(set_to_none=False)` keeps a zero-filled gradient
tensor per parameter."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...call_edits import remove_arguments
from ...context import RuleContext
from ...findings import Finding, Fix, Severity, rule


@rule(
    "TD110",
    "zero-grad-keeps-memory",
    Severity.INFORMATION,
    "`zero_grad(set_to_none=False)` keeps a zero-filled gradient tensor per parameter.",
    fixable=True,
    enabled_by_default=False,
    # every finding is at a `<x>.zero_grad(...)` call (`method_calls("zero_grad")`)
    spells=("zero_grad",),
)
def zero_grad_keeps_memory(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.sem.method_calls("zero_grad"):
        argument = _set_to_none_false(call)
        if argument is None:
            continue
        func = call.func
        assert isinstance(func, ast.Attribute)  # Semantics.method_calls: attribute calls
        receiver = ctx.doc.source_of(func.value)
        if ctx.torch_version >= (2, 0):
            message = (
                "`set_to_none=False` fills every `.grad` with zeros and keeps the memory of "
                "one gradient per parameter between steps; the default since torch 2.0 "
                "(`set_to_none=True`) frees it"
            )
            edits = remove_arguments(ctx, call, [argument])
            fix = None
            if edits is not None:
                fix = Fix("Drop `set_to_none=False`", tuple(edits), safe=False)
        else:
            message = (
                "`set_to_none=False` (the default before torch 2.0) keeps a zero-filled "
                "gradient per parameter; `set_to_none=True` frees it"
            )
            value = argument.value if isinstance(argument, ast.keyword) else argument
            fix = Fix("Use `set_to_none=True`", (ctx.replace(value, "True"),), safe=False)
        yield ctx.finding("TD110", call, f"`{receiver}.zero_grad`: {message}", fix)


def _set_to_none_false(call: ast.Call) -> ast.keyword | ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == "set_to_none" and _is_false(keyword.value):
            return keyword
    if call.args and _is_false(call.args[0]):
        return call.args[0]
    return None


def _is_false(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is False
