"""What several of the autograd rules share."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Fix
from ...training import statement_list_of


def _statement_in_block(ctx: RuleContext, node: ast.AST, block: list[ast.stmt]) -> ast.stmt | None:
    """The statement of `block` that contains `node` (or is it)."""
    for candidate in (node, *ctx.sem.ancestors(node)):
        if isinstance(candidate, ast.stmt) and any(candidate is s for s in block):
            return candidate
    return None


def move_after_fix(
    ctx: RuleContext, statement: ast.stmt, target: ast.AST, title: str
) -> Fix | None:
    """Move a one-line statement to just after the statement of its block that holds `target`."""
    block = statement_list_of(ctx.sem, statement)
    if block is None or not ctx.is_single_line_statement(statement):
        return None
    anchor = _statement_in_block(ctx, target, block)
    if anchor is None or anchor is statement or not ctx.statement_owns_lines(anchor):
        return None
    if isinstance(anchor, ast.If | ast.Try | ast.Match):
        return None  # after an `if` the moved call would depend on another condition
    return Fix(title, ctx.move_line_after(statement, anchor))


def flat_targets(targets: list[ast.expr]) -> Iterator[ast.expr]:
    for target in targets:
        if isinstance(target, ast.Tuple | ast.List):
            yield from flat_targets(list(target.elts))
        elif isinstance(target, ast.Starred):
            yield from flat_targets([target.value])
        else:
            yield target
