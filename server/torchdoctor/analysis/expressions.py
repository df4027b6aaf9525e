"""Small questions about one expression: is it the constant True or None, what is the last part
of its dotted name."""

from __future__ import annotations

import ast
from typing import TypeGuard

from .semantics import Semantics


def last_name(sem: Semantics, node: ast.AST) -> str:
    """`DistributedSampler` for `torch.utils.data.DistributedSampler`; "" when not a name."""
    dotted = sem.dotted(node)
    return dotted.rsplit(".", 1)[-1] if dotted else ""


def is_true(node: ast.AST | None) -> TypeGuard[ast.Constant]:
    return isinstance(node, ast.Constant) and node.value is True


def is_none(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is None
