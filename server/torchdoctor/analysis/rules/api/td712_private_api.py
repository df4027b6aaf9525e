"""TD712 private-api: A non-public torch name that has a public twin
(`torch.utils.data._utils.collate.default_collate`, `_LRScheduler`, ...)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Edit, Finding, Fix, Severity, rule
from ...semantics import Semantics
from .references import (
    attribute_references,
    import_nodes,
    imported_qualnames,
    imports_any,
    rebuild_import_from,
    spell,
)
from .symbols import PRIVATE_ALIASES, PRIVATE_MODULES, Version
from .version_guards import in_compat_branch, unless_compat


@rule(
    "TD712",
    "private-api",
    Severity.WARNING,
    "A non-public torch name that has a public twin (`torch.utils.data._utils.collate."
    "default_collate`, `_LRScheduler`, ...).",
    fixable=True,
)
def private_api(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    version = ctx.torch_version
    # Once per private name and file: at the import that binds it (the import's fix makes every
    # use public), else at the first use, with one fix for all of them.
    uses: dict[str, list[ast.expr]] = {}
    # one scan in C over every name called first: most files call nothing private
    if _PRIVATE_MARK in "\n".join(sem.calls_by_qualname):
        for qualname, calls in sem.calls_by_qualname.items():
            # the cheap half of `_public_twin` first: most called names are not private
            if _maybe_private(qualname) and _public_twin(qualname, version) is not None:
                uses.setdefault(qualname, []).extend(call.func for call in calls)
    for reference in attribute_references(sem):
        if _public_twin(reference.qualname, version) is not None:
            uses.setdefault(reference.qualname, []).append(reference.node)
    for qualname, nodes in uses.items():
        public = _public_twin(qualname, version)
        assert public is not None
        shown = [
            node
            for node in nodes
            if not _reached_through_private_import(sem, node, version)
            and not in_compat_branch(sem, node)
        ]
        if shown:
            yield _first_private_use(ctx, qualname, public, shown)
    if not imports_any(ctx, PRIVATE_ALIASES, text_hints=_PRIVATE_MODULE_NAMES) and not (
        # the cheap halves first, as for the calls above
        _PRIVATE_MARK in "\n".join(sem.imports.values())
        and any(
            _maybe_private(target) and _public_twin(target, version) is not None
            for target in sem.imports.values()
        )
    ):
        return
    for node in import_nodes(ctx):
        yield from _private_import_findings(ctx, node)


def _first_private_use(
    ctx: RuleContext, qualname: str, public: str, nodes: list[ast.expr]
) -> Finding:
    nodes = sorted(set(nodes), key=lambda node: (node.lineno, node.col_offset))
    message = _private_message(qualname, public)
    if len(nodes) > 1:
        message += f" ({len(nodes)} uses in this file; the fix changes all of them)"
    edits: list[Edit] = []
    for node in nodes:
        one = _private_reference_fix(ctx, node, public)
        if one is None:
            edits = []
            break
        edits.extend(one.edits)
    fix = Fix(f"Use the public `{public}`", tuple(edits)) if edits else None
    return ctx.finding("TD712", nodes[0], message, fix)


def _reached_through_private_import(sem: Semantics, node: ast.AST, version: Version) -> bool:
    """`default_collate(...)` after `from torch.utils.data._utils.collate import
    default_collate`: the import is reported, and its fix makes this use public too."""
    root = node
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name):
        return False
    target = sem.imports.get(root.id)
    if target is None or target == root.id:
        return False  # `import torch`: no narrower import to point at
    return _public_twin(target, version) is not None or _public_module(target, version) is not None


_PRIVATE_MODULE_NAMES = tuple(PRIVATE_MODULES)
# What every private name and module listed spells (a private part after a dot), so every
# name `_maybe_private` accepts spells it too: a scan for it over all the names a file calls
# (joined by line breaks, which no name holds) rules most files out at once. Were some entry
# not to spell it, the empty string stands in: found in every text, it rules nothing out.
_PRIVATE_MARK = "._" if all("._" in name for name in (*PRIVATE_ALIASES, *PRIVATE_MODULES)) else ""


def _maybe_private(qualname: str) -> bool:
    return qualname in PRIVATE_ALIASES or qualname.startswith(_PRIVATE_MODULE_NAMES)


def _public_twin(qualname: str, version: Version) -> str | None:
    entry = PRIVATE_ALIASES.get(qualname)
    if entry is not None:
        return entry[0] if version >= entry[1] else None
    for private, (public, since) in PRIVATE_MODULES.items():
        if (qualname == private or qualname.startswith(private + ".")) and version >= since:
            return public + qualname[len(private) :]
    return None


def _private_message(private: str, public: str) -> str:
    return (
        f"`{private}` is not public API (it can change or vanish in any release): use the "
        f"public `{public}`"
    )


def _private_reference_fix(ctx: RuleContext, node: ast.AST, public: str) -> Fix | None:
    if not isinstance(node, ast.Attribute):
        return None  # a bare imported name: the import statement carries the fix
    target = spell(ctx.sem, node, public)
    if target is None:
        return None
    return Fix(f"Use `{target}`", (ctx.replace(node, target),))


def _private_import_findings(
    ctx: RuleContext, node: ast.Import | ast.ImportFrom
) -> Iterator[Finding]:
    version = ctx.torch_version
    if isinstance(node, ast.Import):
        for alias in node.names:
            public = _public_module(alias.name, version)
            if public is None:
                continue
            fix = None
            if (
                alias.asname is not None
                and len(node.names) == 1
                and ctx.is_single_line_statement(node)
            ):
                text = f"import {public} as {alias.asname}"
                fix = Fix(f"Use `{text}`", (ctx.replace(node, text),))
            yield from unless_compat(ctx, "TD712", alias, _private_message(alias.name, public), fix)
        return
    if node.level or node.module is None:
        return
    public_module = _public_module(node.module, version)
    if public_module is not None:
        fix = None
        if ctx.is_single_line_statement(node):
            text = rebuild_import_from(public_module, [(a.name, a.asname) for a in node.names])
            fix = Fix(f"Use `{text}`", (ctx.replace(node, text),))
        yield from unless_compat(
            ctx, "TD712", node, _private_message(node.module, public_module), fix
        )
        return
    entries = list(imported_qualnames(node))
    twins = [(alias, q, _public_twin(q, version)) for alias, q in entries]
    flagged = [(alias, q, public) for alias, q, public in twins if public is not None]
    if not flagged:
        return
    fix = None
    if len(flagged) == len(entries) and ctx.is_single_line_statement(node):
        modules = {public.rpartition(".")[0] for _, _, public in flagged}
        if len(modules) == 1:
            names = []
            for alias, _, public in flagged:
                new_name = public.rpartition(".")[2]
                names.append(
                    (new_name, alias.asname or (alias.name if new_name != alias.name else None))
                )
            text = rebuild_import_from(modules.pop(), names)
            fix = Fix(f"Use `{text}`", (ctx.replace(node, text),))
    for alias, qualname, public in flagged:
        yield from unless_compat(ctx, "TD712", alias, _private_message(qualname, public), fix)
        fix = None


def _public_module(module: str, version: Version) -> str | None:
    for private, (public, since) in PRIVATE_MODULES.items():
        if (module == private or module.startswith(private + ".")) and version >= since:
            return public + module[len(private) :]
    return None
