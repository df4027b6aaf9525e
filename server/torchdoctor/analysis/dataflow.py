"""Local data flow inside one function: which assignment a name refers to at a point, and which
earlier values an expression was computed from. Straight-line order only (no back edges):
enough to tell a loss computed in this iteration from one computed before the loop."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from operator import attrgetter
from typing import NamedTuple

from .semantics import FUNCTION_NODES, Semantics, dotted_name, position
from .tree_walk import child_nodes

# Calls whose result has no autograd history: following a value through them stops there.
GRAPH_CUTTING_METHODS = frozenset({"item", "detach", "tolist", "numpy", "detach_"})
GRAPH_CUTTING_FUNCTIONS = frozenset({"float", "int", "bool", "len", "str", "round"})


class Definition(NamedTuple):
    """One binding of a name (a named tuple: a flow makes thousands, and a frozen dataclass's
    constructor costs four times as much)."""

    name: str
    node: ast.AST  # the statement (Assign, AugAssign, For, With, arguments) that binds the name
    value: ast.expr | None  # the assigned expression, when there is one
    position: tuple[int, int]
    # Where the binding takes effect: after the whole `x = f(x)` (its right side still sees the
    # earlier `x`), after the iterable of a `for`, after the item of a `with`.
    visible_from: tuple[int, int]


@dataclass
class ScopeFlow:
    """All bindings in one function (or the module), excluding nested functions and classes."""

    definitions: dict[str, list[Definition]] = field(default_factory=dict)

    def reaching(self, name: str, at: ast.AST) -> Definition | None:
        """The last binding of `name` in effect where `at` starts (in source order). A node
        inside an assignment sees the binding before it: in `y = y.t()` the right `y` is the
        earlier one, whether `at` is that `y` or the whole statement."""
        point = position(at)
        best = None
        for definition in self.definitions.get(name, []):
            if definition.position >= point:
                break  # sorted by position: nothing later can be in effect at `at`
            if definition.visible_from <= point:
                best = definition
        return best

    def bindings_between(self, name: str, start: ast.AST, end: ast.AST) -> list[Definition]:
        low, high = position(start), position(end)
        return [d for d in self.definitions.get(name, []) if low < d.position < high]


def flow_of(sem: Semantics, scope: ast.AST) -> ScopeFlow:
    sem = sem.whole
    key = f"flow:{id(scope)}"
    flow = sem.derived.get(key)
    if flow is None:
        flow = sem.derived[key] = _build_flow(scope, _binding_statements(sem, scope))
    return flow


def assigned_plainly(sem: Semantics, scope: ast.AST, name: str) -> bool:
    """Some `name = value` or `name: T = value` statement of the scope binds `name`: without
    one, no definition of it is such an assignment, and its data flow need not be built."""
    for statement in _binding_statements(sem.whole, scope):
        if isinstance(statement, ast.Assign):
            if len(statement.targets) == 1:
                target = statement.targets[0]
                if isinstance(target, ast.Name) and target.id == name:
                    return True
        elif isinstance(statement, ast.AnnAssign):
            target = statement.target
            if isinstance(target, ast.Name) and target.id == name:
                return True
    return False


def _binding_statements(sem: Semantics, scope: ast.AST) -> list[ast.AST]:
    """The statements binding names in `scope`: recorded by the semantics walk for the module
    and function bodies; found by walking for any other scope a caller asks about."""
    if isinstance(scope, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef):
        return sem.bindings_by_scope.get(id(scope), [])
    found: list[ast.AST] = []
    stack = list(reversed(getattr(scope, "body", [])))
    while stack:
        node = stack.pop()
        if isinstance(node, BINDING_NODES):
            found.append(node)
        if not isinstance(node, FUNCTION_NODES):
            stack.extend(reversed(child_nodes(node)))
    return found


BINDING_NODES = (
    ast.Assign,
    ast.AnnAssign,
    ast.AugAssign,
    ast.For,
    ast.AsyncFor,
    ast.With,
    ast.AsyncWith,
    ast.NamedExpr,
    *FUNCTION_NODES,
)


def _bind(
    definitions: dict[str, list[Definition]],
    target: ast.AST,
    statement: ast.AST,
    value: ast.expr | None,
    at: tuple[int, int],
    visible_from: tuple[int, int],
) -> None:
    # a function of the module, not a closure of _build_flow: a closure that calls itself is
    # a reference cycle, and it would keep each flow alive until the cyclic collector ran
    kind = type(target)  # exact types: the parser makes no subclasses
    if kind is ast.Name:
        name = target.id  # type: ignore[attr-defined]  # type() tested above
        found = definitions.get(name)
        if found is None:
            found = definitions[name] = []
        found.append(Definition(name, statement, value, at, visible_from))
    elif kind is ast.Attribute or kind is ast.Subscript:
        dotted = dotted_name(target)
        if dotted is not None:
            definitions.setdefault(dotted, []).append(
                Definition(dotted, statement, value, at, visible_from)
            )
    elif kind is ast.Tuple or kind is ast.List:
        for element in target.elts:  # type: ignore[attr-defined]  # type() tested above
            # unpacking: each element depends on the whole value
            element = element.value if type(element) is ast.Starred else element
            _bind(definitions, element, statement, value, at, visible_from)


def _build_flow(scope: ast.AST, statements: list[ast.AST]) -> ScopeFlow:
    flow = ScopeFlow()
    definitions = flow.definitions
    if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
        arguments = scope.args
        for arg in [
            *arguments.posonlyargs,
            *arguments.args,
            *arguments.kwonlyargs,
            *(a for a in (arguments.vararg, arguments.kwarg) if a is not None),
        ]:
            flow.definitions.setdefault(arg.arg, []).append(
                Definition(arg.arg, scope, None, (0, 0), (0, 0))
            )
    # exact types (the parser makes no subclasses): a flow is built for most functions
    for node in statements:
        kind = type(node)
        at = (node.lineno, node.col_offset)  # type: ignore[attr-defined]  # statements have positions
        if kind is ast.Assign:
            after = _end(node)
            for target in node.targets:  # type: ignore[attr-defined]  # type() tested above
                _bind(definitions, target, node, node.value, at, after)  # type: ignore[attr-defined]  # type() tested above
        elif kind is ast.AnnAssign or kind is ast.AugAssign or kind is ast.NamedExpr:
            _bind(definitions, node.target, node, node.value, at, _end(node))  # type: ignore[attr-defined]  # type() tested above
        elif kind is ast.For or kind is ast.AsyncFor:
            _bind(definitions, node.target, node, node.iter, at, _end(node.iter))  # type: ignore[attr-defined]  # type() tested above
        elif kind is ast.With or kind is ast.AsyncWith:
            for item in node.items:  # type: ignore[attr-defined]  # type() tested above
                if item.optional_vars is not None:
                    _bind(
                        definitions,
                        item.optional_vars,
                        node,
                        item.context_expr,
                        at,
                        _end(item.optional_vars),
                    )
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef or kind is ast.ClassDef:
            # the name is usable from the header on (a method may call its own class)
            _bind(definitions, ast.Name(id=node.name), node, None, at, at)  # type: ignore[attr-defined]  # type() tested above
    for bindings in definitions.values():
        bindings.sort(key=_definition_position)
    return flow


_definition_position = attrgetter("position")


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
            if isinstance(func, ast.Name):
                # `netD(x)`, `criterion(out, y)`: the callee is a module or a function, whose
                # parameters are leaves; only the arguments bring a graph into the result
                stack.extend(node.args)
                stack.extend(keyword.value for keyword in node.keywords)
                continue
        if isinstance(node, ast.Attribute) and node.attr in ("data", "shape", "dtype", "device"):
            continue
        if isinstance(node, FUNCTION_NODES):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            found.append(node)
        stack.extend(child_nodes(node))
    return found


def _end(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0)
