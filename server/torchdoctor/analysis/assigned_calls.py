"""The call a name or `self.attr` holds at a place: the assignment that reaches it in its
function (else the one at module level); for `self.attr`, the one assignment in the class.
Calls that move or switch a module (`.to(device)`, `.eval()`) return the module, so they are
looked through."""

from __future__ import annotations

import ast

from .context import RuleContext
from .dataflow import flow_of
from .semantics import Function, Semantics
from .training import function_scope

MOVES = ("to", "cuda", "cpu", "float", "double", "half", "train", "eval")


def without_moves(value: ast.AST) -> ast.AST:
    """`Net(...).to(device).eval()` → `Net(...)`: modules come back from these calls."""
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in MOVES
        and isinstance(value.func.value, ast.Call)
    ):
        value = value.func.value
    return value


def assigned_call(sem: Semantics, node: ast.AST) -> ast.Call | None:
    """The call a name or `self.attr` holds at `node`: the assignment that reaches it in its
    function (else the one module-level assignment); for `self.attr`, the one assignment in
    the class; for other attributes, the one in the file."""
    dotted = sem.dotted(node)
    if dotted is None:
        return None
    value: ast.AST | None = None
    if isinstance(node, ast.Name):
        value = _reaching_value(sem, node)
    else:
        method = sem.enclosing_function(node)
        cls = sem.parent(method) if method is not None else None
        found: list[ast.AST] = []
        for assign in single_assignments_to(sem, dotted):
            assert assign.value is not None
            if dotted.startswith("self."):
                owner = sem.enclosing_function(assign)
                if owner is None or sem.parent(owner) is not cls:
                    continue
            found.append(assign.value)
        value = found[0] if len(found) == 1 else None
    if value is None:
        return None
    value = without_moves(value)
    return value if isinstance(value, ast.Call) else None


def _reaching_value(sem: Semantics, name: ast.Name) -> ast.AST | None:
    assigning = _scopes_assigning(sem, name.id)
    # what is returned is the value of an assignment in the name's scope or at module level:
    # with none (a parameter, a loop variable), known without the scope's data flow; and
    # where no function that assigns it spans the name's line, without the climb to its scope
    # (`model` received by an evaluation function, assigned in `main`)
    tree_assigns = id(sem.tree) in assigning
    if not tree_assigns and not any(_spans(scope, name) for scope in assigning.values()):
        return None
    scope = function_scope(sem, name)
    if id(scope) not in assigning and not tree_assigns:
        return None
    flow = flow_of(sem, scope)
    definition = flow.reaching(name.id, name)
    if definition is None:
        definitions = flow.definitions.get(name.id, [])
        if definitions:
            return None  # bound later in this scope only (a loop) or more than once: unclear
        if scope is sem.tree:
            return None
        definitions = flow_of(sem, sem.tree).definitions.get(name.id, [])
        if len(definitions) != 1:
            return None
        definition = definitions[0]
    node = definition.node
    if isinstance(node, ast.Assign) and not (
        len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
    ):
        return None
    if not isinstance(node, ast.Assign | ast.AnnAssign):
        return None
    return definition.value


def _scopes_assigning(sem: Semantics, name: str) -> dict[int, Function | ast.Module]:
    """The scopes (`function_scope`, by id) of the assignments with a value that bind `name`:
    memoised per name, one pass over them."""
    whole = sem.whole
    memo: dict[str, dict[int, Function | ast.Module]] = whole.derived.setdefault(
        "assigned-calls:scopes", {}
    )
    found = memo.get(name)
    if found is None:
        found = memo[name] = {}
        for assign in whole.assignments_to(name):
            scope = function_scope(whole, assign)
            found[id(scope)] = scope
    return found


def _spans(scope: Function | ast.Module, node: ast.expr) -> bool:
    """The lines of a function (its decorators included: `enclosing_function` counts a name
    in them as the function's) or of the module hold the node's: a scope that holds a node
    spans its lines, so one that does not span them holds no node there."""
    if isinstance(scope, ast.Module):
        return True
    first = scope.decorator_list[0].lineno if scope.decorator_list else scope.lineno
    return first <= node.lineno <= (scope.end_lineno or scope.lineno)


def single_assignments_to(sem: Semantics, dotted: str) -> list[ast.Assign | ast.AnnAssign]:
    """The assignments with a value and a single target that bind `dotted`, in the whole file
    (even for a view focused on some blocks), in source order. Memoised per name: a script
    assigns `criterion` or `model` in function after function, and each use asks."""
    whole = sem.whole
    memo: dict[str, list[ast.Assign | ast.AnnAssign]] = whole.derived.setdefault(
        "assigned-calls:single-assignments", {}
    )
    found = memo.get(dotted)
    if found is None:
        found = memo[dotted] = [
            assign
            for assign in whole.assignments_to(dotted)
            if type(assign) is ast.AnnAssign or len(assign.targets) == 1  # type: ignore[union-attr]  # type() tested first
        ]
    return found


def definition_of(ctx: RuleContext, node: ast.AST) -> ast.Call | None:
    """The constructor call assigned to a name or `self.attr` (see `assigned_call`)."""
    return assigned_call(ctx.sem, node)
