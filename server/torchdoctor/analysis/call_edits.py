"""Editing the arguments of a call: adding a keyword, removing arguments with their commas.
Positions come from the call's tokens, so trailing commas, comments and argument lists spread
over several lines are all handled (and a comment is never deleted)."""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass

from .context import RuleContext
from .findings import Edit, Span


@dataclass(frozen=True)
class Slot:
    start: tuple[int, int]
    end: tuple[int, int]


@dataclass(frozen=True)
class CallLayout:
    """Where each argument of a call starts and ends, found from the call's tokens."""

    nodes: tuple[ast.AST, ...]  # positional expressions and keyword nodes, in source order
    slots: tuple[Slot, ...]
    open_paren: tuple[int, int]
    close_paren: tuple[int, int]
    comments: tuple[tuple[int, int], ...]
    trailing_comma: bool


def call_layout(ctx: RuleContext, call: ast.Call) -> CallLayout | None:
    doc = ctx.doc
    span = doc.span_of(call)
    func_end = doc.span_of(call.func)
    text = doc.text_in(span)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None

    def where(row: int, col: int) -> tuple[int, int]:
        line = span.start_line + row - 1
        return (line, col + span.start_col if row == 1 else col)

    depth = 0
    open_paren: tuple[int, int] | None = None
    close_paren: tuple[int, int] | None = None
    slots: list[Slot] = []
    comments: list[tuple[int, int]] = []
    first: tuple[int, int] | None = None
    last: tuple[int, int] | None = None
    trailing_comma = False
    for token in tokens:
        start, end = where(*token.start), where(*token.end)
        if open_paren is None:
            if (
                token.type == tokenize.OP
                and token.string == "("
                and depth == 0
                and start
                >= (
                    func_end.end_line,
                    func_end.end_col,
                )
            ):
                open_paren = start
                depth = 1
                continue
            if token.type == tokenize.OP and token.string in "([{":
                depth += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                depth -= 1
            continue
        if token.type == tokenize.COMMENT:
            comments.append(start)
            continue
        if token.type in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            continue
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
            if depth == 0:
                close_paren = start
                if first is not None and last is not None:
                    slots.append(Slot(first, last))
                    trailing_comma = False
                break
        if depth == 1 and token.type == tokenize.OP and token.string == ",":
            if first is not None and last is not None:
                slots.append(Slot(first, last))
            first = last = None
            trailing_comma = True
            continue
        if first is None:
            first = start
        last = end
        trailing_comma = False
    if open_paren is None or close_paren is None:
        return None
    arguments: list[ast.expr | ast.keyword] = [*call.args, *call.keywords]
    nodes = sorted(arguments, key=lambda node: (node.lineno, node.col_offset))
    if len(nodes) != len(slots):
        return None
    return CallLayout(
        tuple(nodes), tuple(slots), open_paren, close_paren, tuple(comments), trailing_comma
    )


def remove_arguments(ctx: RuleContext, call: ast.Call, doomed: list[ast.AST]) -> list[Edit] | None:
    """Edits that delete the given arguments (keyword nodes or positional expressions) and the
    commas that go with them; None when a comment sits in the way or positions are unclear."""
    layout = call_layout(ctx, call)
    if layout is None:
        return None
    ids = {id(node) for node in doomed}
    indices = [index for index, node in enumerate(layout.nodes) if id(node) in ids]
    if len(indices) != len(doomed) or not indices:
        return None
    runs: list[list[int]] = []
    for index in indices:
        if runs and runs[-1][-1] == index - 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    count = len(layout.slots)
    edits: list[Edit] = []
    for run in runs:
        first, last = run[0], run[-1]
        whole = _whole_lines(ctx, layout, first, last)
        if whole is not None:
            edits.append(Edit(whole, ""))
            continue
        if first == 0 and last == count - 1:
            start, end = layout.slots[0].start, layout.close_paren
        elif last + 1 < count:
            start, end = layout.slots[first].start, layout.slots[last + 1].start
        else:
            start, end = layout.slots[first - 1].end, layout.slots[last].end
        if any(start <= comment < end for comment in layout.comments):
            return None
        edits.append(Edit(Span(start[0], start[1], end[0], end[1]), ""))
    return edits


def _whole_lines(ctx: RuleContext, layout: CallLayout, first: int, last: int) -> Span | None:
    """The lines of arguments first..last when they stand alone on their lines (a trailing
    comment on them goes with them); None otherwise."""
    doc = ctx.doc
    start_line = layout.slots[first].start[0]
    end_line = layout.slots[last].end[0]
    if doc.index.line(start_line)[: layout.slots[first].start[1]].strip():
        return None
    if first > 0 and layout.slots[first - 1].end[0] >= start_line:
        return None
    if start_line <= layout.open_paren[0]:
        return None
    following = layout.slots[last + 1].start if last + 1 < len(layout.slots) else layout.close_paren
    if following[0] <= end_line:
        return None
    tail = doc.index.line(end_line)[layout.slots[last].end[1] :].strip()
    if tail.startswith(","):
        tail = tail[1:].strip()
    if tail and not tail.startswith("#"):
        return None
    slot_lines = {slot.end[0] for slot in layout.slots[first : last + 1]}
    for comment in layout.comments:
        if start_line <= comment[0] <= end_line and comment[0] not in slot_lines:
            return None
    return Span(start_line, 0, end_line + 1, 0)


def add_keyword(ctx: RuleContext, call: ast.Call, text: str) -> Edit | None:
    """An edit that passes one more keyword argument (`name=value`) to `call`."""
    if any(isinstance(arg, ast.GeneratorExp) for arg in call.args):
        return None  # `f(x for x in y)` cannot take a second argument without parentheses
    layout = call_layout(ctx, call)
    if layout is None:
        return None
    if not layout.slots:
        line, col = layout.open_paren
        return Edit(Span(line, col + 1, line, col + 1), text)
    last = layout.slots[-1]
    close_line, close_col = layout.close_paren
    doc = ctx.doc
    if (
        layout.trailing_comma
        and close_line > last.end[0]
        and not doc.index.line(close_line)[:close_col].strip()
        and not doc.index.line(last.start[0])[: last.start[1]].strip()
    ):
        indent = doc.indentation_of(last.start[0])
        return Edit(Span(close_line, 0, close_line, 0), f"{indent}{text},{doc.line_break()}")
    return Edit(Span(last.end[0], last.end[1], last.end[0], last.end[1]), f", {text}")
