"""TD000 syntax-error: Code that does not parse: Python stops with a SyntaxError before running
any of the file."""

from __future__ import annotations

from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Finding, Severity, Span, rule

SYNTAX_ERROR = "TD000"
NAME = "syntax-error"


@rule(
    SYNTAX_ERROR,
    NAME,
    Severity.ERROR,
    "Code that does not parse: Python stops with a SyntaxError before running any of the file.",
    fixable=False,
    always_on=True,
)
def syntax_errors(ctx: RuleContext) -> Iterator[Finding]:
    lines = ctx.doc.index.lines
    for problem in ctx.doc.syntax_problems:
        yield ctx.finding(
            SYNTAX_ERROR,
            _character_at(lines, problem.line, problem.col),
            f"SyntaxError: {problem.message}",
        )
    nul = _first_nul(lines) if "\0" in ctx.doc.text else None
    if nul is not None:
        # the parser here reads NUL as a space; CPython refuses the whole file
        yield ctx.finding(
            SYNTAX_ERROR,
            _character_at(lines, *nul),
            "SyntaxError: source code cannot contain null bytes",
        )


def undecodable_source_finding(
    lines: tuple[str, ...], line: int, col: int, encoding: str
) -> Finding:
    """TD000 for bytes that are not valid in the file's encoding (the CLI sees the bytes; an
    editor hands over text it has already decoded)."""
    return Finding(
        SYNTAX_ERROR,
        NAME,
        f"SyntaxError: the bytes here are not valid {encoding} (the file's encoding: a "
        "`# -*- coding: ... -*-` line declares another one)",
        _character_at(lines, line, col),
        Severity.ERROR,
    )


def _character_at(lines: tuple[str, ...], line: int, col: int) -> Span:
    """One character at (line, col), clamped into the document: errors reported past the end
    of a line or of the file (an unexpected EOF) still get a range an editor can draw."""
    if not lines:
        return Span(0, 0, 0, 0)
    line = min(max(line, 0), len(lines) - 1)
    length = len(lines[line])
    col = min(max(col, 0), length)
    if col == length and length > 0:
        col -= 1  # past the end (a missing `:`): mark the last character instead
    return Span(line, col, line, min(col + 1, length))


def _first_nul(lines: tuple[str, ...]) -> tuple[int, int] | None:
    for number, text in enumerate(lines):
        position = text.find("\0")
        if position >= 0:
            return number, position
    return None
