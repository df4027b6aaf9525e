"""The nodes of a function's own body, without nested functions and classes."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .semantics import FUNCTION_NODES
from .tree_walk import pre_order


def own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """Every node of a function body in source order, without the bodies of nested functions,
    classes and lambdas (their own nodes are yielded, not entered)."""
    return pre_order(getattr(function, "body", []), FUNCTION_NODES)
