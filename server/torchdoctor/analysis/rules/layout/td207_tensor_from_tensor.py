"""TD207 tensor-from-tensor: `torch.tensor(t)` where `t` is already a tensor: a copy that warns
and drops autograd."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Finding, Fix, Severity, called_names, rule
from ...semantics import FUNCTION_NODES
from ...tree_walk import walk
from ._shared import is_tensor_expr


@rule(
    "TD207",
    "tensor-from-tensor",
    Severity.WARNING,
    "`torch.tensor(t)` where `t` is already a tensor: a copy that warns and drops autograd.",
    fixable=True,
    # every finding is at a call of `torch.tensor`
    spells=called_names("torch.tensor"),
)
def tensor_from_tensor(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.sem.calls_to("torch.tensor"):
        if len(call.args) != 1:
            continue
        data = call.args[0]
        if isinstance(data, ast.List | ast.Tuple | ast.Constant | ast.ListComp | ast.Dict):
            continue
        if not is_tensor_expr(ctx, data, call, by_use=False) or _guarded_by_isinstance(
            ctx, call, data
        ):
            continue
        text = ctx.operand_source(data)
        message = (
            f"`{ctx.doc.source_of(call.func)}({ctx.doc.source_of(data)})` copies a tensor that "
            'already exists: torch warns "To copy construct from a tensor, it is recommended '
            'to use sourceTensor.detach().clone()" and the copy loses the autograd history; '
            f"use `{text}.detach().clone()`"
        )
        yield ctx.finding("TD207", call, message, _clone_fix(ctx, call, text))


def _guarded_by_isinstance(ctx: RuleContext, call: ast.Call, data: ast.AST) -> bool:
    """`if not isinstance(x, torch.Tensor): x = torch.tensor(x)` (or `type(x) is list`): the
    author checked what `x` is."""
    name = ctx.sem.dotted(data)
    if name is None:
        return False
    for ancestor in ctx.sem.ancestors(call):
        if isinstance(ancestor, ast.If | ast.IfExp):
            for node in walk(ancestor.test):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in ("isinstance", "type")
                    and node.args
                    and ctx.sem.dotted(node.args[0]) == name
                ):
                    return True
        if isinstance(ancestor, FUNCTION_NODES):
            break
    return False


def _clone_fix(ctx: RuleContext, call: ast.Call, text: str) -> Fix | None:
    conversions = []
    grad = ""
    for keyword in call.keywords:
        value = ctx.doc.source_of(keyword.value)
        if keyword.arg in ("dtype", "device"):
            conversions.append(f"{keyword.arg}={value}")
        elif keyword.arg == "requires_grad":
            grad = f".requires_grad_({value})"
        else:
            return None
    replacement = f"{text}.detach().clone()"
    if conversions:
        replacement += f".to({', '.join(conversions)})"
    replacement += grad
    return Fix(f"Use `{replacement}`", (ctx.replace(call, replacement),))
