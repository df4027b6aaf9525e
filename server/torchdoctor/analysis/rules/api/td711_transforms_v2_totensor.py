"""TD711 transforms-v2-totensor: `torchvision.transforms.v2.ToTensor` is deprecated: use
`v2.ToImage()` + `v2.ToDtype(torch.float32, scale=True)`."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Finding, Fix, Severity, called_names, rule
from .references import (
    V2_TO_TENSOR,
    attribute_references,
    import_nodes,
    imported_qualnames,
    imports_any,
)
from .version_guards import unless_compat

V2_COMPOSE = ("torchvision.transforms.v2.Compose", "torchvision.transforms.v2._container.Compose")


@rule(
    "TD711",
    "transforms-v2-totensor",
    Severity.WARNING,
    "`torchvision.transforms.v2.ToTensor` is deprecated: use `v2.ToImage()` + "
    "`v2.ToDtype(torch.float32, scale=True)`.",
    fixable=True,
    # every finding is at a call of, a reference to or an import of a V2_TO_TENSOR name; its
    # imports are looked at only once one of them is an imported target (imports_any), whose
    # last part counts as spelt
    spells=called_names(*V2_TO_TENSOR),
)
def transforms_v2_to_tensor(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    message = (
        "`v2.ToTensor` is deprecated (torchvision warns when it is created): use "
        "`v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])`, which gives the "
        "same values"
    )
    for call in sem.calls_to(*V2_TO_TENSOR):
        yield from unless_compat(ctx, "TD711", call.func, message, _to_tensor_fix(ctx, call))
    for reference in attribute_references(sem):
        if reference.qualname in V2_TO_TENSOR:
            yield from unless_compat(ctx, "TD711", reference.node, message)
    if imports_any(ctx, V2_TO_TENSOR):
        for node in import_nodes(ctx):
            if isinstance(node, ast.ImportFrom):
                for alias, qualname in imported_qualnames(node):
                    if qualname in V2_TO_TENSOR:
                        yield from unless_compat(ctx, "TD711", alias, message)


def _to_tensor_fix(ctx: RuleContext, call: ast.Call) -> Fix | None:
    if call.args or call.keywords or not isinstance(call.func, ast.Attribute):
        return None
    torch_root = ctx.sem.name_bound_to("torch", plain_first=True)
    if torch_root is None:
        return None
    prefix = ctx.doc.source_of(call.func.value)
    pair = f"{prefix}.ToImage(), {prefix}.ToDtype({torch_root}.float32, scale=True)"
    parent = ctx.sem.parent(call)
    grandparent = ctx.sem.parent(parent) if parent is not None else None
    if (
        isinstance(parent, ast.List)
        and isinstance(grandparent, ast.Call)
        and ctx.sem.call_qualname(grandparent) in V2_COMPOSE
    ):
        return Fix(
            "Replace with `ToImage(), ToDtype(torch.float32, scale=True)`",
            (ctx.replace(call, pair),),
        )
    text = f"{prefix}.Compose([{pair}])"
    return Fix(f"Use `{text}`", (ctx.replace(call, text),))
