"""What several of the data rules share."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from enum import Enum

from ...bindings import assignments_to, enclosing_class, names_bound_in, scope_of
from ...dataflow import flow_of
from ...expressions import is_none, last_name
from ...loader_purpose import loop_index
from ...semantics import BlockIndex, Function, Semantics, position
from ...training import function_scope

# Builtins that iterate the loader they are given (`next(iter(loader))`, `list(loader)`).
ITERATING_BUILTINS = frozenset({"iter", "list", "tuple", "sorted"})


def int_constant(node: ast.AST | None) -> int | None:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
    ):
        return node.value
    return None


def binding_scope(sem: Semantics, dotted: str, node: ast.AST) -> ast.AST | None:
    """What `same_binding` compares for `dotted` at `node`: the class for `self.x`, else the
    function (or module) holding `node`."""
    return enclosing_class(sem, node) if dotted.startswith("self.") else scope_of(sem, node)


def reaches_from_module(sem: Semantics, dotted: str, used_scope: ast.AST | None) -> bool:
    """Whether a module-level binding of `dotted` is what a use in `used_scope` (another
    scope) reads: a global read from a function that does not bind the name itself."""
    if dotted.startswith("self.") or used_scope is None:
        return False
    return dotted.split(".", 1)[0] not in names_bound_in(sem, used_scope)


def is_main_guard(test: ast.AST) -> bool:
    """`__name__ == "__main__"` (either way round)."""
    # exact type tests (the parser makes no subclasses) and no generators: asked of the test
    # of every top-level `if` of a file with a DataLoader
    if type(test) is not ast.Compare or len(test.ops) != 1 or type(test.ops[0]) is not ast.Eq:
        return False
    left, right = test.left, test.comparators[0]
    return (_is_dunder_name(left) and _is_main_string(right)) or (
        _is_dunder_name(right) and _is_main_string(left)
    )


def _is_dunder_name(node: ast.expr) -> bool:
    return type(node) is ast.Name and node.id == "__name__"


def _is_main_string(node: ast.expr) -> bool:
    return type(node) is ast.Constant and node.value == "__main__"


def in_main_guard(sem: Semantics, node: ast.AST) -> bool:
    child = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, ast.If) and is_main_guard(ancestor.test) and child in ancestor.body:
            return True
        child = ancestor
    return False


def parameter_names(function: Function) -> list[str]:
    arguments = function.args
    return [arg.arg for arg in [*arguments.posonlyargs, *arguments.args]]


class Presence(str, Enum):
    """Whether an argument's value is a real object, None, either, or unknown."""

    SET = "set"
    NONE = "none"
    MAYBE = "maybe"  # a sampler on one path, None on another
    UNKNOWN = "unknown"


def sampler_presence(sem: Semantics, expr: ast.AST | None, at: ast.AST, depth: int = 0) -> Presence:
    """Whether a `sampler=`/`batch_sampler=` value is certainly a sampler, None, or either."""
    if expr is None or is_none(expr):
        return Presence.NONE
    if depth > 3:
        return Presence.UNKNOWN
    if isinstance(expr, ast.Call):
        name = last_name(sem, expr.func)
        return Presence.SET if "Sampler" in name else Presence.UNKNOWN
    if isinstance(expr, ast.List | ast.Tuple | ast.ListComp):
        return Presence.SET
    if isinstance(expr, ast.IfExp):
        branches = {
            sampler_presence(sem, expr.body, at, depth + 1),
            sampler_presence(sem, expr.orelse, at, depth + 1),
        }
        if branches == {Presence.SET}:
            return Presence.SET
        if branches == {Presence.SET, Presence.NONE}:
            return Presence.MAYBE
        return Presence.UNKNOWN
    dotted = sem.dotted(expr)
    if dotted is None:
        return Presence.UNKNOWN
    flow = flow_of(sem, function_scope(sem, at))
    definitions = [d for d in flow.definitions.get(dotted, []) if d.position < position(at)]
    if definitions:
        last = definitions[-1]
        if not isinstance(last.node, ast.Assign | ast.AnnAssign) or last.value is None:
            return Presence.UNKNOWN
        value = sampler_presence(sem, last.value, last.node, depth + 1)
        if value is not Presence.SET or _unconditional_before(sem, last.node, at):
            return value
        earlier = [d.value for d in definitions[:-1]]
        if any(is_none(v) for v in earlier):
            return Presence.MAYBE
        return Presence.UNKNOWN
    if "." in dotted:
        # `self.sampler`, bound in another method: every assignment in the file decides
        values = [_assigned_value(assign) for assign in assignments_to(sem, dotted)]
        kinds = {
            sampler_presence(sem, v, v, depth + 1) if v is not None else Presence.UNKNOWN
            for v in values
        }
        if kinds == {Presence.SET}:
            return Presence.SET
        if kinds and kinds <= {Presence.SET, Presence.NONE} and Presence.SET in kinds:
            return Presence.MAYBE
    return Presence.UNKNOWN


def _assigned_value(assign: ast.Assign | ast.AnnAssign) -> ast.expr | None:
    return assign.value


def _unconditional_before(sem: Semantics, definition: ast.AST, use: ast.AST) -> bool:
    """True when every branch and loop around `definition` also holds `use`."""
    use_ancestors = {id(node) for node in sem.ancestors(use)}
    for ancestor in sem.ancestors(definition):
        if isinstance(ancestor, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
            return True
        if isinstance(ancestor, ast.If | ast.For | ast.AsyncFor | ast.While | ast.Try | ast.Match):
            if id(ancestor) not in use_ancestors:
                return False
    return True


@dataclass(frozen=True)
class IterationSite:
    node: ast.expr  # what to point at: the loader inside a loop header, or the iterating call
    loop: ast.For | ast.AsyncFor | None  # the loop that walks the loader, when there is one


def iteration_sites(sem: Semantics, dotted: str, bound_at: ast.AST) -> list[IterationSite]:
    """Loops over `dotted` (`for b in loader`, `enumerate(tqdm(loader))`) and `iter(loader)`."""
    sem = sem.whole  # a fact of the file, even for a focused view
    bound_scope = binding_scope(sem, dotted, bound_at)
    key = f"data:sites:{dotted}:{id(bound_scope)}"
    cached: list[IterationSite] | None = sem.derived.get(key)
    if cached is not None:
        return cached
    by_scope = _sites_by_scope(sem, dotted)
    if isinstance(bound_scope, ast.Module) and not dotted.startswith("self."):
        chosen = [
            entry
            for used_scope, entries in by_scope.items()
            if used_scope is bound_scope or reaches_from_module(sem, dotted, used_scope)
            for entry in entries
        ]
    else:
        chosen = list(by_scope.get(bound_scope, []))
    # in source order; the index of a site keeps the order of sites at the same place
    chosen.sort(key=lambda entry: (entry[1].node.lineno, entry[1].node.col_offset, entry[0]))
    found = [site for _, site in chosen]
    sem.derived[key] = found
    return found


def _sites_by_scope(
    sem: Semantics, dotted: str
) -> dict[ast.AST | None, list[tuple[int, IterationSite]]]:
    """Every place `dotted` is iterated, grouped by the `binding_scope` of the place and
    numbered in the order found, built once per name: asking each binding of a name shared by
    many functions (`train_loader`) to scan every loop over that name would be quadratic."""
    sem = sem.whole  # a fact of the file, even for a focused view
    index: dict[str, dict[ast.AST | None, list[tuple[int, IterationSite]]]] = (
        sem.derived.setdefault("data:sites_by_scope", {})
    )
    found = index.get(dotted)
    if found is not None:
        return found
    found = index[dotted] = {}
    places: list[tuple[ast.AST, IterationSite]] = [
        (loop, IterationSite(node, loop)) for loop, node in loop_index(sem)[1].get(dotted, [])
    ]
    for call in _iterating_builtin_calls(sem):
        if sem.dotted(call.args[0]) == dotted and not _inside_loop_header(sem, call):
            site = IterationSite(call, None)
            # once per argument that passes the name, as the index of passed names lists it
            places.extend((call, site) for _ in range(_times_passed(sem, call, dotted)))
    for number, (place, site) in enumerate(places):
        found.setdefault(binding_scope(sem, dotted, place), []).append((number, site))
    return found


def _iterating_builtin_calls(sem: Semantics) -> list[ast.Call]:
    """`iter(x)`, `list(x)`, `tuple(x)`, `sorted(x)` with an argument, in source order: found
    among the calls by name (a few) rather than through every call's arguments."""
    found: list[ast.Call] | None = sem.derived.get("data:iterating-builtin-calls")
    if found is None:
        calls_by_name = sem.calls_by_name
        found = sorted(
            (
                call
                for name in ITERATING_BUILTINS
                if name in calls_by_name
                for call in calls_by_name[name]
                if call.args
            ),
            key=position,
        )
        sem.derived["data:iterating-builtin-calls"] = found
    return found


def _times_passed(sem: Semantics, call: ast.Call, dotted: str) -> int:
    return sum(
        1
        for value in [*call.args, *(k.value for k in call.keywords)]
        if isinstance(value, ast.Name | ast.Attribute) and sem.dotted(value) == dotted
    )


def _inside_loop_header(sem: Semantics, node: ast.AST) -> bool:
    child = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, ast.For | ast.AsyncFor) and child is ancestor.iter:
            return True
        if isinstance(ancestor, ast.stmt):
            return False
        child = ancestor
    return False


def calls_passing(sem: Semantics, dotted: str) -> list[ast.Call]:
    """Calls that get `dotted` itself as an argument, from an index of the whole file made
    block by block (an edit gathers the blocks it changed again)."""
    index = sem.whole.gathered("data:passed-names", passed_names_in_block)
    return index[dotted] if dotted in index else []


def passed_names_in_block(sem: Semantics, block: BlockIndex) -> dict[str, list[ast.Call]]:
    index: dict[str, list[ast.Call]] = {}
    for call in block.calls:
        for value in [*call.args, *(k.value for k in call.keywords)]:
            if isinstance(value, ast.Name | ast.Attribute):
                name = sem.dotted(value)
                if name is not None:
                    index.setdefault(name, []).append(call)
    return index
