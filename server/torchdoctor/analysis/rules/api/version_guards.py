"""Code written to support several torch versions (a version test, an `except ImportError`
fallback), where the api rules stay quiet."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Finding, Fix
from ...semantics import Semantics
from ...tree_walk import walk


def in_compat_branch(sem: Semantics, node: ast.AST) -> bool:
    """Code written to support several torch versions: an `except` fallback, or a branch of an
    `if` that tests the version or feature availability (`hasattr(torch.amp, "custom_fwd")`)."""
    child = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, ast.ExceptHandler):
            return True
        if isinstance(ancestor, ast.Try) and child in ancestor.body and _catches_missing(ancestor):
            return True
        if isinstance(child, ast.stmt) and _after_version_return(ancestor, child):
            return True
        child = ancestor
        if isinstance(ancestor, ast.If | ast.IfExp) and _tests_version(ancestor.test):
            return True
        if isinstance(ancestor, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return False
    return False


def _after_version_return(parent: ast.AST, statement: ast.stmt) -> bool:
    """`if hasattr(torch, "linalg"): return new(...)` followed by the old call."""
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if not isinstance(block, list) or statement not in block:
            continue
        for earlier in block[: block.index(statement)]:
            if (
                isinstance(earlier, ast.If)
                and _tests_version(earlier.test)
                and isinstance(earlier.body[-1], ast.Return | ast.Raise)
            ):
                return True
    return False


def _catches_missing(statement: ast.Try) -> bool:
    """`try: <new or old API> except (ImportError, AttributeError): <the other one>`."""
    for handler in statement.handlers:
        if handler.type is None:
            return True
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        for kind in types:
            name = kind.id if isinstance(kind, ast.Name) else getattr(kind, "attr", "")
            if name in ("ImportError", "ModuleNotFoundError", "AttributeError", "Exception"):
                return True
    return False


def _tests_version(test: ast.AST) -> bool:
    for node in walk(test):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("hasattr", "getattr"):
                return True
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
        if isinstance(name, str) and ("version" in name.lower() or VERSION_FLAG.search(name)):
            return True
    return False


# flags computed once from the installed torch: `_TORCH_GREATER_EQUAL_2_4`, `TORCH_GE_2_1`
VERSION_FLAG = re.compile(r"(?i)torch\w*(\d+_\d+|greater|less|newer|older)")


def unless_compat(
    ctx: RuleContext, code: str, node: ast.AST, message: str, fix: Fix | None = None
) -> Iterator[Finding]:
    """The finding, unless `node` sits in code that deliberately supports older torch."""
    if not in_compat_branch(ctx.sem, node):
        yield ctx.finding(code, node, message, fix)
