"""Where names are bound and what they hold: the scope of a node, whether two places see the same
binding, assignments by target, module-level functions, the methods of a class, the local
class an instance was built from, the calls of a plain name."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping

from .dataflow import flow_of
from .semantics import FUNCTION_NODES, BlockIndex, Function, Semantics
from .training import function_scope
from .tree_walk import walk


def assigned_name(sem: Semantics, call: ast.Call) -> str | None:
    """`train_loader` for `train_loader = DataLoader(...)` (also `self.loader = ...`)."""
    parent = sem.parent(call)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.value is call:
        return sem.dotted(parent.targets[0])
    if isinstance(parent, ast.AnnAssign) and parent.value is call:
        return sem.dotted(parent.target)
    if isinstance(parent, ast.NamedExpr) and parent.value is call:
        return parent.target.id
    return None


def enclosing_class(sem: Semantics, node: ast.AST) -> ast.ClassDef | None:
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, ast.ClassDef):
            return ancestor
    return None


def same_binding(sem: Semantics, dotted: str, bound_at: ast.AST, used_at: ast.AST) -> bool:
    """Whether `dotted` used at `used_at` can be the value bound at `bound_at`. It depends on
    the two places only through their `binding_scope`s."""
    if dotted.startswith("self."):
        return enclosing_class(sem, bound_at) is enclosing_class(sem, used_at)
    bound_scope = scope_of(sem, bound_at)
    used_scope = scope_of(sem, used_at)
    if bound_scope is used_scope:
        return True
    if isinstance(bound_scope, ast.Module):
        # a global read from a function that does not bind the name itself
        return dotted.split(".", 1)[0] not in names_bound_in(sem, used_scope)
    return False


def scope_of(sem: Semantics, node: ast.AST) -> ast.AST:
    """The function holding `node`, else the module (`Semantics.enclosing_function` memoises
    the climb for every node on the way: no memo of its own to make per file)."""
    return function_scope(sem, node)


def names_bound_in(sem: Semantics, scope: ast.AST) -> set[str]:
    """Plain names a function binds itself (parameters, assignments, loop targets)."""
    sem = sem.whole  # a fact of the file, even for a focused view
    index: dict[int, set[str]] | None = sem.derived.get("data:bound_names")
    if index is None:
        index = {}
        for function in sem.functions:
            arguments = function.args
            index[id(function)] = {
                arg.arg
                for arg in [
                    *arguments.posonlyargs,
                    *arguments.args,
                    *arguments.kwonlyargs,
                    arguments.vararg,
                    arguments.kwarg,
                ]
                if arg is not None
            }
        targets: list[tuple[ast.AST, ast.AST]] = []
        for assign in sem.assigns:
            for target in assign.targets if isinstance(assign, ast.Assign) else [assign.target]:
                targets.append((assign, target))
        for loop in sem.loops:
            if isinstance(loop, ast.For | ast.AsyncFor):
                targets.append((loop, loop.target))
        for statement, bound in targets:
            owner = sem.enclosing_function(statement)
            if owner is None:
                continue
            names = index.setdefault(id(owner), set())
            for node in walk(bound):
                if isinstance(node, ast.Name):
                    names.add(node.id)
        sem.derived["data:bound_names"] = index
    return index.get(id(scope), set())


def at_module_level(sem: Semantics, node: ast.AST) -> bool:
    # a plain climb by exact type: asked for every call of a file that builds a loader
    parents = sem.parents
    current = parents.get(node)
    while current is not None:
        if type(current) in _FUNCTION_TYPES:
            return False
        current = parents.get(current)
    return True


_FUNCTION_TYPES = frozenset(FUNCTION_NODES)


def module_functions(sem: Semantics) -> Mapping[str, Function]:
    """Functions defined at module level (outside classes and functions), by name: the last
    of a name, as Python binds it."""
    return _LastOfEach(sem.gathered("data:module-functions", _module_functions_in_block))


class _LastOfEach(Mapping[str, Function]):
    """The last function of each name in groups by name."""

    def __init__(self, groups: Mapping[str, list[Function]]) -> None:
        self._groups = groups

    def __getitem__(self, name: str) -> Function:
        return self._groups[name][-1]

    def __iter__(self) -> Iterator[str]:
        return iter(self._groups)

    def __len__(self) -> int:
        return len(self._groups)


def _module_functions_in_block(sem: Semantics, block: BlockIndex) -> dict[str, list[Function]]:
    # whether a function is nested is a fact of its own block: no ancestor of it in the block
    # is a function, a lambda or a class
    found: dict[str, list[Function]] = {}
    parents = block.parents
    for function in block.functions:
        ancestor = parents.get(function)
        while ancestor is not None and not isinstance(ancestor, FUNCTION_NODES):
            ancestor = parents.get(ancestor)
        if ancestor is None:
            found.setdefault(function.name, []).append(function)
    return found


def methods_of(cls: ast.ClassDef) -> dict[str, Function]:
    return {
        node.name: node
        for node in cls.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def class_of_instance(sem: Semantics, name: str, at: ast.AST) -> ast.ClassDef | None:
    """The local class `name` was built from (`trainer = Trainer(...)`), when it was."""
    definition = flow_of(sem, function_scope(sem, at)).reaching(name, at)
    if definition is None or not isinstance(definition.value, ast.Call):
        return None
    constructor = definition.value.func
    if not isinstance(constructor, ast.Name):
        return None
    for cls in sem.classes:
        if cls.name == constructor.id and at_module_level(sem, cls):
            return cls
    return None


def assignments_to(sem: Semantics, dotted: str) -> list[ast.Assign | ast.AnnAssign]:
    """Every `dotted = ...` in the file, from an index built once."""
    sem = sem.whole  # a fact of the file, even for a focused view
    index: dict[str, list[ast.Assign | ast.AnnAssign]] | None = sem.derived.get("data:assignments")
    if index is None:
        index = {}
        for assign in sem.assigns:
            if isinstance(assign, ast.Assign):
                targets = assign.targets
            elif isinstance(assign, ast.AnnAssign):
                targets = [assign.target]
            else:
                continue
            for target in targets:
                name = sem.dotted(target)
                if name is not None:
                    index.setdefault(name, []).append(assign)
        sem.derived["data:assignments"] = index
    return index.get(dotted, [])


def calls_by_name(sem: Semantics, name: str) -> list[ast.Call]:
    """Calls of a plain name (`train(...)`) anywhere in the file, in source order."""
    return sem.whole.calls_by_name.get(name, [])
