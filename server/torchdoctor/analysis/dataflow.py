"""Local data flow inside one function: which assignment a name refers to at a point, and which
earlier values an expression was computed from. Straight-line order only (no back edges):
enough to tell a loss computed in this iteration from one computed before the loop."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .semantics import FUNCTION_NODES, Semantics

# Calls whose result has no autograd history: following a value through them stops there.
GRAPH_CUTTING_METHODS = frozenset({"item", "detach", "tolist", "numpy", "detach_"})
GRAPH_CUTTING_FUNCTIONS = frozenset({"float", "int", "bool", "len", "str", "round"})


@dataclass(frozen=True)
class Definition:
    name: str
    node: ast.AST  # the statement (Assign, AugAssign, For, With, arguments) that binds the name
    value: ast.AST | None  # the assigned expression, when there is one
    position: tuple[int, int]


@dataclass
class ScopeFlow:
    """All bindings in one function (or the module), excluding nested functions and classes."""

    definitions: dict[str, list[Definition]] = field(default_factory=dict)

    def reaching(self, name: str, at: ast.AST) -> Definition | None:
        """The last binding of `name` that starts before `at` (in source order)."""
        point = _position(at)
        best = None
        for definition in self.definitions.get(name, []):
            if definition.position < point:
                best = definition
        return best

    def bindings_between(self, name: str, start: ast.AST, end: ast.AST) -> list[Definition]:
        low, high = _position(start), _position(end)
        return [d for d in self.definitions.get(name, []) if low < d.position < high]


def flow_of(sem: Semantics, scope: ast.AST) -> ScopeFlow:
    key = f"flow:{id(scope)}"
    flow = sem.derived.get(key)
    if flow is None:
        flow = sem.derived[key] = _build_flow(scope)
    return flow


def _build_flow(scope: ast.AST) -> ScopeFlow:
    flow = ScopeFlow()

    def bind(target: ast.AST, statement: ast.AST, value: ast.AST | None) -> None:
        if isinstance(target, ast.Name):
            flow.definitions.setdefault(target.id, []).append(
                Definition(target.id, statement, value, _position(statement))
            )
        elif isinstance(target, ast.Attribute | ast.Subscript):
            dotted = _dotted(target)
            if dotted is not None:
                flow.definitions.setdefault(dotted, []).append(
                    Definition(dotted, statement, value, _position(statement))
                )
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                # unpacking: each element depends on the whole value
                bind(
                    element.value if isinstance(element, ast.Starred) else element, statement, value
                )

    if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
        arguments = scope.args
        for arg in [
            *arguments.posonlyargs,
            *arguments.args,
            *arguments.kwonlyargs,
            *(a for a in (arguments.vararg, arguments.kwarg) if a is not None),
        ]:
            flow.definitions.setdefault(arg.arg, []).append(
                Definition(arg.arg, scope, None, (0, 0))
            )
        children = list(scope.body)
    else:
        children = list(getattr(scope, "body", []))
    stack = list(reversed(children))
    while stack:
        node = stack.pop()
        if isinstance(node, FUNCTION_NODES):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bind(ast.Name(id=node.name), node, None)
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                bind(target, node, node.value)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            bind(node.target, node, node.value)
        elif isinstance(node, ast.For | ast.AsyncFor):
            bind(node.target, node, node.iter)
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                if item.optional_vars is not None:
                    bind(item.optional_vars, node, item.context_expr)
        elif isinstance(node, ast.NamedExpr):
            bind(node.target, node, node.value)
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    for definitions in flow.definitions.values():
        definitions.sort(key=lambda d: d.position)
    return flow


def names_with_history(expr: ast.AST) -> list[ast.Name]:
    """Name nodes in `expr` whose values flow into the result with their autograd history
    (not through `.item()`, `.detach()`, `float(...)` and the like)."""
    found: list[ast.Name] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in GRAPH_CUTTING_METHODS:
                continue
            if isinstance(func, ast.Name) and func.id in GRAPH_CUTTING_FUNCTIONS:
                continue
        if isinstance(node, ast.Attribute) and node.attr in ("data", "shape", "dtype", "device"):
            continue
        if isinstance(node, FUNCTION_NODES):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _position(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
