"""What the probe runs when a model class lives in a notebook: the imports, function and class
definitions and constant assignments of the cells up to the class, and nothing else.

A notebook's cells train models, download data sets and read files at the top level; a probe
of one class must not run any of that. Every statement that is left out becomes blank lines, so
line numbers in the probe's report are the notebook program's lines (analysis/notebook.py).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .lines import LINE_BREAK

DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Prelude:
    text: str  # the program with every statement that does not run blanked out
    kept: int  # top-level statements kept
    skipped: int  # top-level statements blanked (training, data loading, printing...)


def probe_prelude(program: str, class_name: str) -> Prelude | None:
    """The program up to and including the first top-level class `class_name`, reduced to what
    a probe may run; None when there is no such class or the program does not parse."""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    target = next(
        (s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == class_name), None
    )
    if target is None:
        return None
    lines = LINE_BREAK.split(program)
    breaks = [*LINE_BREAK.findall(program), ""]
    keep = [False] * len(lines)
    kept = skipped = 0
    for statement in tree.body:
        if statement.lineno > target.lineno:
            break
        if _runs_in_probe(statement):
            kept += 1
            start = _first_line(statement)
            for line in range(start - 1, (statement.end_lineno or statement.lineno)):
                keep[line] = True
        else:
            skipped += 1
    text = "".join(
        (line if keep[number] else "") + breaks[number] for number, line in enumerate(lines)
    )
    return Prelude(text, kept, skipped)


def _first_line(statement: ast.stmt) -> int:
    decorators: list[ast.expr] = getattr(statement, "decorator_list", [])
    return min([statement.lineno, *(decorator.lineno for decorator in decorators)])


def _runs_in_probe(statement: ast.stmt) -> bool:
    if isinstance(statement, DEFINITIONS):
        return True
    if isinstance(statement, ast.Assign):
        return _is_constant(statement.value)
    if isinstance(statement, ast.AnnAssign):
        return statement.value is None or _is_constant(statement.value)
    if isinstance(statement, ast.Try):
        # `try: import apex / except ImportError: apex = None`
        blocks = [statement.body, *(handler.body for handler in statement.handlers)]
        return all(_runs_in_probe(inner) for block in blocks for inner in block)
    return isinstance(statement, ast.Pass) or _is_docstring(statement)


def _is_constant(node: ast.expr) -> bool:
    """A literal, or arithmetic and containers of literals: `HIDDEN = 2 * 64`, `SIZES = (3, 8)`."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _is_constant(node.operand)
    if isinstance(node, ast.BinOp):
        return _is_constant(node.left) and _is_constant(node.right)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_is_constant(item) for item in node.elts)
    if isinstance(node, ast.Dict):
        return all(
            key is not None and _is_constant(key) and _is_constant(value)
            for key, value in zip(node.keys, node.values, strict=True)
        )
    return False


def _is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
