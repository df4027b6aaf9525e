"""Walking a syntax tree fast: each node type's child fields, found once from its ASDL
signature, without the fields that hold plain values (names, strings, numbers) or the parser's
shared singletons (`ctx`, operators). `ast.iter_child_nodes` looks at every field of every node
through two generators; the rules' walks run once per node of the file, so this is where the
analysis spends its time."""

from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Iterable, Iterator

# Fields that never hold a child worth visiting: `ctx` is a shared Load/Store singleton.
_SKIPPED_FIELDS = frozenset({"ctx"})
# ASDL types of fields that hold plain values (names, strings, numbers), or operators: the
# parser gives every `+` (every `not`, `==`, `and`) one shared instance, with no position and
# no parent of its own, so the walks skip them like the `ctx` singletons.
_PRIMITIVE_TYPES = frozenset(
    {"identifier", "string", "constant", "int", "operator", "unaryop", "cmpop", "boolop"}
)
_ASDL_FIELD = re.compile(r"(\w+)[?*]? (\w+)")
CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(kind: type) -> tuple[str, ...]:
    """The fields of a node type that can hold child nodes, in source order; their types come
    from the ASDL signature CPython puts in each node class's docstring."""
    fields = CHILD_FIELDS.get(kind)
    if fields is None:
        primitive = {
            name
            for asdl_type, name in _ASDL_FIELD.findall(kind.__doc__ or "")
            if asdl_type in _PRIMITIVE_TYPES
        }
        fields = CHILD_FIELDS[kind] = tuple(
            name
            for name in kind._fields  # type: ignore[attr-defined]  # every ast node class has _fields
            if name not in _SKIPPED_FIELDS and name not in primitive
        )
    return fields


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """`ast.iter_child_nodes(node)` as a list, in the same order, without the singletons."""
    kind = type(node)
    fields = CHILD_FIELDS.get(kind)
    if fields is None:
        fields = child_fields(kind)
    children: list[ast.AST] = []
    for name in fields:
        value = getattr(node, name, None)
        if type(value) is list:
            children.extend([item for item in value if isinstance(item, ast.AST)])
        elif isinstance(value, ast.AST):
            children.append(value)
    return children


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk(node)`: the node and everything below it, breadth first, in the same order,
    without the singletons."""
    todo = deque([node])
    popleft = todo.popleft
    extend = todo.extend
    while todo:
        current = popleft()
        extend(child_nodes(current))
        yield current


def pre_order(nodes: list[ast.AST], stop: tuple[type, ...] = ()) -> Iterator[ast.AST]:
    """Each of `nodes` and everything below it, in source order (depth first); a node of a type
    in `stop` is yielded but not entered."""
    stack = list(reversed(nodes))
    pop = stack.pop
    while stack:
        current = pop()
        yield current
        if isinstance(current, stop):
            continue
        children = child_nodes(current)
        children.reverse()
        stack.extend(children)


# Node types that carry line numbers (statements, expressions, arguments, keywords, aliases...),
# from their `_attributes`; `arguments`, `comprehension` and the singletons carry none.
_POSITIONED: dict[type, bool] = {}


def shift_lines(nodes: Iterable[ast.AST], delta: int) -> None:
    """Move each of `nodes` (not the nodes below them: pass every node) by `delta` lines, as
    `ast.increment_lineno` does for a whole subtree; an Enter keystroke moves every block
    below it, so this runs over most of the file's nodes and must not walk them again."""
    for node in nodes:
        kind = type(node)
        positioned = _POSITIONED.get(kind)
        if positioned is None:
            positioned = _POSITIONED[kind] = "lineno" in kind._attributes
        if positioned:
            node.lineno += delta  # type: ignore[attr-defined]  # positioned: tested above
            end = node.end_lineno  # type: ignore[attr-defined]  # positioned: tested above
            if end is not None:
                node.end_lineno = end + delta  # type: ignore[attr-defined]  # positioned: tested above
