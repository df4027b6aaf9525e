"""How a file refers to torch symbols: its imports, attribute chains used as values, and the
spelling of another symbol through the aliases the file already has."""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from ...context import RuleContext
from ...semantics import BlockIndex, Semantics, position
from .symbols import AMP_SYMBOLS, DEPRECATED, PRIVATE_ALIASES, PRIVATE_MODULES, REMOVED

V2_TO_TENSOR = (
    "torchvision.transforms.v2.ToTensor",
    "torchvision.transforms.v2._deprecated.ToTensor",
)


# The last names of every symbol a reference check looks for: a cheap filter before resolving.
_REFERENCED_NAMES = frozenset(
    qualname.rsplit(".", 1)[-1]
    for qualname in (*REMOVED, *DEPRECATED, *AMP_SYMBOLS, *PRIVATE_ALIASES, *V2_TO_TENSOR)
)
# What a reference the checks look for spells: one of those last names, or the private part of
# a private module's path (`torch.distributed._tensor.DTensor`).
_REFERENCE_SPELLINGS = _REFERENCED_NAMES | frozenset(
    part for module in PRIVATE_MODULES for part in module.split(".") if part.startswith("_")
)
# The packages of those symbols and of the private modules: a reference resolves through an
# import, so a file that imports from none of them refers to nothing the checks look for.
_REFERENCED_PACKAGES = frozenset(
    qualname.partition(".")[0]
    for qualname in (
        *REMOVED,
        *DEPRECATED,
        *AMP_SYMBOLS,
        *PRIVATE_ALIASES,
        *PRIVATE_MODULES,
        *V2_TO_TENSOR,
    )
)


def spell(sem: Semantics, node: ast.AST, target: str) -> str | None:
    """Source text naming `target`, through the alias `node` already uses (`F.upsample` →
    `F.interpolate`) or else through this file's own `torch` import."""
    best: tuple[int, int, str] | None = None  # (module length, is the call's own alias, name)
    dotted = sem.dotted(node)
    own = None
    if dotted is not None and isinstance(node, ast.Attribute):
        own = dotted.split(".", 1)[0]
    for name, module in sem.imports.items():
        if target.startswith(module + ".") and module.startswith("torch"):
            candidate = (len(module), int(name == own), name)
            if best is None or candidate > best:
                best = candidate
    if own is not None:
        own_module = sem.imports.get(own)
        if own_module is not None and target.startswith(own_module + "."):
            if best is None or len(own_module) >= best[0]:
                best = (len(own_module), 1, own)
    if best is not None:
        name = best[2]
        return name + target[len(sem.imports[name]) :]
    if target.startswith("torch."):
        root = sem.name_bound_to("torch", plain_first=True)
        if root is not None:
            return root + target[len("torch") :]
    return None


@dataclass(frozen=True)
class _Reference:
    """A use of an imported name that is not a call: a decorator, a base class, an argument."""

    node: ast.Attribute
    qualname: str


def attribute_references(sem: Semantics) -> list[_Reference]:
    """Attribute chains used as values (decorators, base classes, arguments, right-hand sides)
    in the whole file, found through the indexes, not by walking the tree again. Calls are
    handled separately."""
    whole = sem.whole
    cached: list[_Reference] | None = whole.derived.get("api.references")
    if cached is not None:
        return cached
    if whole.imported_packages().isdisjoint(_REFERENCED_PACKAGES):
        whole.derived["api.references"] = []
        return []
    # found block by block, kept on each block while the imports stay, and grouped by what
    # they name across versions (an edit is cheap)
    groups = whole.gathered("api.references", _block_references, reads_names=True)
    references = [
        _Reference(node, qualname) for qualname, nodes in groups.items() for node in nodes
    ]
    references.sort(key=lambda reference: position(reference.node))
    whole.derived["api.references"] = references
    return references


def _block_references(sem: Semantics, block: BlockIndex) -> dict[str, list[ast.Attribute]]:
    if block.attribute_names.isdisjoint(_REFERENCE_SPELLINGS):
        # one set operation spares most blocks the look at every argument: a reference is an
        # attribute, spelt with one of those names or through a private module's part
        return {}
    if not _may_refer(block):
        # the names stand only where no reference can: `self.norm = ...`, `self.norm(x)`
        return {}
    candidates: list[ast.AST] = []
    for function in block.functions:
        candidates.extend(function.decorator_list)
    for cls in block.classes:
        candidates.extend(cls.decorator_list)
        candidates.extend(cls.bases)
    attribute = ast.Attribute
    # every argument of every call passes here: only attributes are kept (type() is exact,
    # and cheaper than collecting everything to test it afterwards)
    for call in block.calls:
        for arg in call.args:
            kind = type(arg)
            if kind is attribute:
                candidates.append(arg)
            elif kind is ast.List or kind is ast.Tuple:
                candidates.extend(arg.elts)  # type: ignore[attr-defined]  # type() tested above
        for keyword in call.keywords:
            if type(keyword.value) is attribute:
                candidates.append(keyword.value)
    for assign in block.assigns:
        if type(assign.value) is attribute:
            candidates.append(assign.value)
    references: dict[str, list[ast.Attribute]] = {}
    seen: set[int] = set()
    for node in candidates:
        if type(node) is not attribute or id(node) in seen:
            continue
        seen.add(id(node))
        if node.attr not in _REFERENCED_NAMES and not _in_private_module(node):
            continue
        qualname = sem.qualname(node)
        if qualname is not None:
            references.setdefault(qualname, []).append(node)
    for nodes in references.values():
        nodes.sort(key=position)  # source order, as the group is merged
    return references


def _may_refer(block: BlockIndex) -> bool:
    """Some attribute the look below keeps stands where it looks: one spelt with a referenced
    name, or one with a `_` name in its chain, as a decorator, a base class, a call's argument
    (or an item of a list or tuple that is one), a keyword argument's value or an assigned
    value. Found from the block's attributes and their parents: a file spells `norm` as a
    layer's name far more often than as a reference, and the look at every argument of every
    call costs ten times as much."""
    names = block.attribute_names
    referenced = names & _REFERENCED_NAMES
    underscored = [name for name in names if name[0] == "_"]
    if not referenced and not underscored:
        return False
    looked_for = referenced.union(underscored)
    parents = block.parents
    for node in block.attributes:
        attr = node.attr
        if attr not in looked_for:
            continue  # most attributes: one look-up
        if attr in referenced:
            if _where_a_reference_stands(node, parents):
                return True
            continue
        # each attribute above it has it in its chain (`_in_private_module`)
        outer = parents.get(node)
        while type(outer) is ast.Attribute:
            if _where_a_reference_stands(outer, parents):
                return True
            outer = parents.get(outer)
    return False


def _where_a_reference_stands(node: ast.Attribute, parents: dict[ast.AST, ast.AST]) -> bool:
    """`node` is one of the expressions `_block_references` looks at."""
    parent = parents.get(node)
    kind = type(parent)
    if kind is ast.Call:
        return parent.func is not node  # type: ignore[union-attr]  # type() tested above
    if kind is ast.List or kind is ast.Tuple:
        call = parents.get(parent)  # type: ignore[arg-type]  # type() tested above
        return type(call) is ast.Call and call.func is not parent
    if kind is ast.keyword:
        return type(parents.get(parent)) is ast.Call  # type: ignore[arg-type]  # type() tested above
    if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
        return any(decorator is node for decorator in parent.decorator_list)  # type: ignore[union-attr]  # type() tested above
    if kind is ast.ClassDef:
        return any(
            each is node
            for each in (*parent.decorator_list, *parent.bases)  # type: ignore[union-attr]  # type() tested above
        )
    if kind is ast.Assign or kind is ast.AnnAssign or kind is ast.AugAssign:
        return parent.value is node  # type: ignore[union-attr]  # type() tested above
    return False


def _in_private_module(node: ast.Attribute) -> bool:
    value = node.value
    while isinstance(value, ast.Attribute):
        if value.attr.startswith("_"):
            return True
        value = value.value
    return False


def import_nodes(ctx: RuleContext) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of the file, in source order."""
    return ctx.sem.whole.import_statements


def imported_qualnames(node: ast.ImportFrom) -> Iterator[tuple[ast.alias, str]]:
    if node.level or node.module is None:
        return
    for alias in node.names:
        if alias.name != "*":
            yield alias, f"{node.module}.{alias.name}"


def imports_any(
    ctx: RuleContext, wanted: Collection[str], text_hints: tuple[str, ...] = ()
) -> bool:
    """Cheap test before walking for import statements: does any import bind a wanted name?"""
    # the membership tests run in C: five rules ask this of every file
    if any(map(wanted.__contains__, ctx.sem.imports.values())):
        return True
    text = ctx.doc.text
    for hint in text_hints:  # a loop, not a generator: the callers pass one hint or none
        if hint in text:
            return True
    return False


def rebuild_import_from(module: str, names: list[tuple[str, str | None]]) -> str:
    parts = [
        name if asname is None or asname == name else f"{name} as {asname}"
        for name, asname in names
    ]
    return f"from {module} import {', '.join(parts)}"
