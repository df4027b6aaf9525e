"""What several of the distributed rules share."""

from __future__ import annotations

import ast

from ...tree_walk import walk

RANK_WORDS = ("rank", "gpu", "ordinal", "process_index")


def mentions_rank(expr: ast.AST) -> bool:
    for node in walk(expr):
        name = ""
        if isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value
        if any(word in name.lower() for word in RANK_WORDS):
            return True
    return False
