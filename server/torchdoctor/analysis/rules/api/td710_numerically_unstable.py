"""TD710 numerically-unstable: `torch.log(1 + x)`, `torch.exp(x) - 1`,
`torch.log(torch.sum(torch.exp(x)))`: use `log1p`, `expm1`, `logsumexp`."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Finding, Fix, Severity, called_names, rule
from ...semantics import Semantics
from .call_arguments import has_star, is_constant, is_one, keyword_named
from .references import spell


@rule(
    "TD710",
    "numerically-unstable",
    Severity.WARNING,
    "`torch.log(1 + x)`, `torch.exp(x) - 1`, `torch.log(torch.sum(torch.exp(x)))`: use "
    "`log1p`, `expm1`, `logsumexp`.",
    fixable=True,
    # Off by default: whether `log(1 + x)` loses anything depends on how small x gets, which
    # the text does not say; on the ecosystem corpus 2 of its 3 findings changed no number.
    enabled_by_default=False,
    spells=called_names("torch.log", "torch.exp"),
)
def numerically_unstable(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for call in sem.calls_to("torch.log"):
        if len(call.args) != 1 or call.keywords:
            continue
        argument = call.args[0]
        if isinstance(argument, ast.BinOp) and isinstance(argument.op, ast.Add):
            yield from _log_one_plus(ctx, call, argument)
        elif isinstance(argument, ast.Call):
            yield from _log_sum_exp(ctx, call, argument)
    for call in sem.calls_to("torch.exp"):
        parent = sem.parent(call)
        if (
            isinstance(parent, ast.BinOp)
            and isinstance(parent.op, ast.Sub)
            and parent.left is call
            and is_one(parent.right)
        ):
            fix = None
            if len(call.args) == 1 and not call.keywords and not has_star(call):
                target = spell(sem, call.func, "torch.expm1")
                if target is not None:
                    text = f"{target}({ctx.doc.source_of(call.args[0])})"
                    fix = Fix(f"Use `{text}`", (ctx.replace(parent, text),))
            message = (
                "`torch.exp(x) - 1` loses all precision for small x (float32: exp(1e-8) - 1 is "
                "0): use `torch.expm1(x)`"
            )
            yield ctx.finding("TD710", parent, message, fix)


def _log_one_plus(ctx: RuleContext, call: ast.Call, argument: ast.BinOp) -> Iterator[Finding]:
    if is_one(argument.left):
        x = argument.right
    elif is_one(argument.right):
        x = argument.left
    else:
        return
    sem = ctx.sem
    inner = x if isinstance(x, ast.Call) and sem.call_qualname(x) == "torch.exp" else None
    if inner is not None and len(inner.args) == 1 and not inner.keywords:
        message = (
            "`torch.log(1 + torch.exp(x))` overflows to inf once x exceeds 88 (float32) and "
            "loses precision where exp(x) is tiny: use `torch.nn.functional.softplus(x)`"
        )
        target = spell(sem, call.func, "torch.nn.functional.softplus")
        fix = None
        if target is not None and not has_star(inner):
            text = f"{target}({ctx.doc.source_of(inner.args[0])})"
            fix = Fix(f"Use `{text}`", (ctx.replace(call, text),), safe=False)
        yield ctx.finding("TD710", call, message, fix)
        return
    message = (
        "`torch.log(1 + x)` loses all precision for small x (float32: log(1 + 1e-8) is 0): use "
        "`torch.log1p(x)`"
    )
    target = spell(sem, call.func, "torch.log1p")
    fix = None
    if target is not None:
        text = f"{target}({ctx.doc.source_of(x)})"
        fix = Fix(f"Use `{text}`", (ctx.replace(call, text),))
    yield ctx.finding("TD710", call, message, fix)


def _log_sum_exp(ctx: RuleContext, call: ast.Call, inner: ast.Call) -> Iterator[Finding]:
    sem = ctx.sem
    if sem.call_qualname(inner) == "torch.sum":
        if not inner.args:
            return
        exp, rest = inner.args[0], inner.args[1:]
    elif isinstance(inner.func, ast.Attribute) and inner.func.attr == "sum":
        exp, rest = inner.func.value, list(inner.args)
    else:
        return
    if not (isinstance(exp, ast.Call) and sem.call_qualname(exp) == "torch.exp"):
        return
    if len(exp.args) != 1 or exp.keywords or has_star(exp) or has_star(inner):
        return
    if _is_max_shifted(sem, exp.args[0], call):
        return  # `m + log(sum(exp(x - m)))`: the stable log-sum-exp written out by hand
    dim = rest[0] if rest else (k.value if (k := keyword_named(inner, "dim")) else None)
    keepdim = (
        rest[1] if len(rest) > 1 else (k.value if (k := keyword_named(inner, "keepdim")) else None)
    )
    message = (
        "`torch.log(torch.sum(torch.exp(x)))` overflows to inf once an element of x exceeds 88 "
        "(float32) and underflows to -inf for very negative x: use `torch.logsumexp(x, dim)`"
    )
    fix = None
    others = [k for k in inner.keywords if k.arg not in ("dim", "keepdim")]
    if dim is not None and not is_constant(dim, None) and len(rest) <= 2 and not others:
        target = spell(sem, call.func, "torch.logsumexp")
        if target is not None:
            parts = [ctx.doc.source_of(exp.args[0]), ctx.doc.source_of(dim)]
            if keepdim is not None:
                parts.append(f"keepdim={ctx.doc.source_of(keepdim)}")
            text = f"{target}({', '.join(parts)})"
            fix = Fix(f"Use `{text}`", (ctx.replace(call, text),))
    elif dim is None or is_constant(dim, None):
        message += " (logsumexp needs `dim`: all dimensions are `dim=tuple(range(x.dim()))`)"
    yield ctx.finding("TD710", call, message, fix)


def _is_max_shifted(sem: Semantics, value: ast.AST, at: ast.Call) -> bool:
    """`exp(x - m)`, or `exp(shifted)` where `shifted = x - m` in the same function."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Sub):
        return True
    if not isinstance(value, ast.Name):
        return False
    scope = sem.enclosing_function(at)
    for assign in sem.assigns:
        if not isinstance(assign, ast.Assign) or (assign.lineno, assign.col_offset) > (
            at.lineno,
            at.col_offset,
        ):
            continue
        if any(isinstance(t, ast.Name) and t.id == value.id for t in assign.targets):
            if sem.enclosing_function(assign) is scope and isinstance(assign.value, ast.BinOp):
                if isinstance(assign.value.op, ast.Sub):
                    return True
    return False
