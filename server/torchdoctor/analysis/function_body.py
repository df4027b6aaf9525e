"""The nodes of a function's own body, without nested functions and classes."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .semantics import FUNCTION_NODES


def own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """Every node of a function body, without the bodies of nested functions and classes."""
    stack = list(reversed(getattr(function, "body", [])))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, FUNCTION_NODES):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
