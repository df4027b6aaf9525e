"""The keywords and arguments of a call, and edits that replace them."""

from __future__ import annotations

import ast

from ...context import RuleContext
from ...findings import Edit, Span


def keyword_named(call: ast.Call, name: str) -> ast.keyword | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword
    return None


def has_star(call: ast.Call) -> bool:
    return any(isinstance(arg, ast.Starred) for arg in call.args) or any(
        keyword.arg is None for keyword in call.keywords
    )


def has_double_star(call: ast.Call) -> bool:
    return any(keyword.arg is None for keyword in call.keywords)


def is_constant(node: ast.AST | None, value: object) -> bool:
    return (
        isinstance(node, ast.Constant) and type(node.value) is type(value) and node.value == value
    )


def is_one(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value == 1


def argument_nodes(call: ast.Call) -> list[ast.expr | ast.keyword]:
    nodes: list[ast.expr | ast.keyword] = [*call.args, *call.keywords]
    return sorted(nodes, key=lambda node: (node.lineno, node.col_offset))


def keyword_name_span(ctx: RuleContext, keyword: ast.keyword) -> Span:
    span = ctx.doc.span_of(keyword)
    assert keyword.arg is not None
    return Span(span.start_line, span.start_col, span.start_line, span.start_col + len(keyword.arg))


def replace_call(ctx: RuleContext, call: ast.Call, text: str) -> Edit:
    return ctx.replace(call, text)


def arguments_text(ctx: RuleContext, call: ast.Call) -> str:
    return ", ".join(ctx.doc.source_of(node) for node in argument_nodes(call))
