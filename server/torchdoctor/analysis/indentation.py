"""A file's indentation step, and edits that indent a range of lines while leaving the inside of
multi-line strings alone."""

from __future__ import annotations

import re

from .context import RuleContext
from .findings import Edit, Span


def indent_unit(ctx: RuleContext) -> str:
    """The file's own indentation step (four spaces when it has no indented line)."""
    for line in ctx.doc.index.lines:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line and not stripped.startswith("#"):
            prefix = line[: len(line) - len(stripped)]
            return "\t" if prefix.startswith("\t") else prefix
    return "    "


STRING_OR_COMMENT = re.compile(
    r"#[^\r\n]*|(\"\"\"|\'\'\')|\"(?:\\.|[^\"\\\r\n])*\"|'(?:\\.|[^'\\\r\n])*'"
)


def lines_inside_strings(text: str) -> set[int]:
    """0-based numbers of the lines of `text` that start inside a triple-quoted string."""
    inside: set[int] = set()
    position = 0
    while True:
        match = STRING_OR_COMMENT.search(text, position)
        if match is None:
            return inside
        if match.group(1) is None:
            position = match.end()
            continue
        quote = match.group(1)
        end = match.end()
        while True:
            end = text.find(quote, end)
            if end < 0:
                end = len(text)
                break
            backslashes = len(text[:end]) - len(text[:end].rstrip("\\"))
            if backslashes % 2 == 0:
                break
            end += 1
        first = text.count("\n", 0, match.start())
        last = first + text.count("\n", match.start(), end)
        inside.update(range(first + 1, last + 1))
        position = end + len(quote)


def indent_lines(ctx: RuleContext, first_line: int, last_line: int, unit: str) -> list[Edit]:
    """Edits that indent lines first..last by `unit`, leaving blank lines and the inside of
    multi-line strings alone."""
    doc = ctx.doc
    text = "\n".join(doc.index.line(n) for n in range(first_line, last_line + 1))
    inside_strings = {first_line + line for line in lines_inside_strings(text)}
    edits: list[Edit] = []
    for line in range(first_line, last_line + 1):
        if line in inside_strings or not doc.index.line(line).strip():
            continue
        edits.append(Edit(Span(line, 0, line, 0), unit))
    return edits
