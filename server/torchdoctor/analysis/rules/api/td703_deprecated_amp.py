"""TD703 deprecated-amp: `torch.cuda.amp`/`torch.cpu.amp` autocast, GradScaler and custom_fwd/bwd
are deprecated since torch 2.4: use `torch.amp` with a device argument."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Finding, Fix, Severity, called_names, rule
from ...semantics import Semantics
from .call_arguments import has_star, replace_call
from .references import (
    attribute_references,
    import_nodes,
    imported_qualnames,
    imports_any,
    spell,
)
from .symbols import AMP_DEPRECATED_IN, AMP_SYMBOLS
from .version_guards import unless_compat


@rule(
    "TD703",
    "deprecated-amp",
    Severity.WARNING,
    "`torch.cuda.amp`/`torch.cpu.amp` autocast, GradScaler and custom_fwd/bwd are deprecated "
    "since torch 2.4: use `torch.amp` with a device argument.",
    fixable=True,
    # every finding is at a call of, a reference to or an import of an AMP_SYMBOLS name; its
    # imports are looked at only once one of them is an imported target (imports_any), whose
    # last part counts as spelt
    spells=called_names(*AMP_SYMBOLS),
)
def deprecated_amp(ctx: RuleContext) -> Iterator[Finding]:
    if ctx.torch_version < AMP_DEPRECATED_IN:
        return
    sem = ctx.sem
    # Names whose uses are reported: those uses carry the fix (the device argument goes into
    # the call), so the `from torch.cuda.amp import ...` that bound them is not reported again.
    reported_names: set[str] = set()
    # one set operation first: most files call no amp symbol
    called = [] if sem.calls_by_qualname.keys().isdisjoint(AMP_SYMBOLS) else AMP_SYMBOLS.items()
    for qualname, (kind, device) in called:
        for call in sem.calls_by_qualname.get(qualname, []):
            fix = _amp_call_fix(ctx, call, kind, device)
            for finding in unless_compat(
                ctx, "TD703", call.func, _amp_message(qualname, kind, device), fix
            ):
                reported_names.add(_root_name(call.func))
                yield finding
    for reference in attribute_references(sem):
        entry = AMP_SYMBOLS.get(reference.qualname)
        if entry is None:
            continue
        kind, device = entry
        fix = None
        if kind in ("custom_fwd", "custom_bwd") and _is_decorator(sem, reference.node):
            target = spell(sem, reference.node, f"torch.amp.{kind}")
            if target is not None:
                fix = Fix(
                    f'Use `@torch.amp.{kind}(device_type="{device}")`',
                    (ctx.replace(reference.node, f'{target}(device_type="{device}")'),),
                )
        yield from unless_compat(
            ctx, "TD703", reference.node, _amp_message(reference.qualname, kind, device), fix
        )
    if imports_any(ctx, AMP_SYMBOLS):
        for node in import_nodes(ctx):
            if not isinstance(node, ast.ImportFrom):
                continue
            for alias, qualname in imported_qualnames(node):
                entry = AMP_SYMBOLS.get(qualname)
                bound = alias.asname or alias.name
                if entry is None or (
                    bound in reported_names and sem.imports.get(bound) == qualname
                ):
                    continue
                yield from unless_compat(ctx, "TD703", alias, _amp_message(qualname, *entry))


def _root_name(node: ast.AST) -> str:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _amp_message(qualname: str, kind: str, device: str) -> str:
    short = qualname.replace(".autocast_mode", "").replace(".grad_scaler", "")
    if kind in ("custom_fwd", "custom_bwd"):
        new = f'torch.amp.{kind}(device_type="{device}")'
    else:
        new = f'torch.amp.{kind}("{device}")'
    return f"`{short}` is deprecated since torch 2.4 (FutureWarning on use): use `{new}`"


def _is_decorator(sem: Semantics, node: ast.AST) -> bool:
    parent = sem.parent(node)
    return isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and (
        node in parent.decorator_list
    )


def _amp_call_fix(ctx: RuleContext, call: ast.Call, kind: str, device: str) -> Fix | None:
    sem = ctx.sem
    target = spell(sem, call.func, f"torch.amp.{kind}")
    if target is None or has_star(call):
        return None
    keywords = ", ".join(ctx.doc.source_of(keyword) for keyword in call.keywords)
    if kind in ("custom_fwd", "custom_bwd"):
        # used as `@torch.cuda.amp.custom_fwd(cast_inputs=...)`; a positional is the function
        if call.args:
            return None
        arguments = f'device_type="{device}"' + (f", {keywords}" if keywords else "")
    else:
        if call.args:
            return None  # positional order differs: (enabled, dtype, ...) vs (device, dtype, ...)
        arguments = f'"{device}"' + (f", {keywords}" if keywords else "")
    if "\n" in arguments or "#" in arguments:
        return None
    text = f"{target}({arguments})"
    return Fix(f"Use `{text}`", (replace_call(ctx, call, text),))
