"""A parsed document. Half-typed code is the normal case in an editor, so parsing never fails:
the statements that parse are kept and the broken ones are replaced, line for line, by `pass`."""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass, field

from .blocks import is_continuation, scan
from .findings import Span
from .gc_pause import gc_paused
from .lines import LineIndex
from .noqa import Suppression, find_suppressions, may_hold_suppressions
from .semantics import Semantics, build_semantics

# Repairs per top-level block before the block is given up; each repair re-parses one block.
MAX_REPAIRS_PER_BLOCK = 12
INDENTED_BLOCK_AFTER = re.compile(r"expected an indented block after .* on line (\d+)")


@dataclass(frozen=True)
class SyntaxProblem:
    line: int  # 0-based
    col: int
    message: str


@dataclass
class Document:
    text: str
    path: str
    index: LineIndex
    tree: ast.Module
    syntax_problems: list[SyntaxProblem] = field(default_factory=list)
    # no block needed repairing: the tree is `ast.parse(text)` itself (a fresh parse) or the
    # file's blocks each parsed alone (incremental.py)
    parsed_whole: bool = field(default=False, repr=False, compare=False)
    _semantics: Semantics | None = field(default=None, init=False, repr=False, compare=False)
    _suppressions: dict[int, Suppression] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @classmethod
    def parse(cls, text: str, path: str = "<unknown>") -> Document:
        with gc_paused():
            return cls.parse_while_paused(text, path)

    @classmethod
    def parse_while_paused(cls, text: str, path: str) -> Document:
        """`parse` for a caller that has paused the collector itself (`engine.check`: one
        pause around the parse and the rules, where each pause costs a microsecond)."""
        index = LineIndex.of(text)
        tree, problems, whole = _parse_tolerant(text, index)
        return cls(text, path, index, tree, problems, whole)

    @property
    def semantics(self) -> Semantics:
        """Built once per document and shared: the rules, the editor's outline and the probe's
        diagnostics all read it (on a 3,000-line file it costs about 11 ms)."""
        if self._semantics is None:
            self._semantics = build_semantics(self.tree)
        return self._semantics

    def drop_derived_facts(self) -> None:
        """Forget the facts the rules derived from the semantics (they are found again if
        asked). They refer back to the semantics: a batch check drops them once a file's
        findings are made, so the document is freed by reference counting, not left to the
        collector."""
        if self._semantics is not None:
            self._semantics.derived.clear()

    @property
    def suppressions(self) -> dict[int, Suppression]:
        """The noqa comments by line: found once, though an edit runs the rules in parts."""
        if self._suppressions is None:
            # one scan in C first: most files have no noqa at all
            found = may_hold_suppressions(self.text)
            self._suppressions = find_suppressions(self.index.lines) if found else {}
        return self._suppressions

    @property
    def fully_parsed(self) -> bool:
        return not self.syntax_problems

    def span_of(self, node: ast.AST) -> Span:
        """The node's range in code-point columns; nodes without positions get an empty span."""
        return Span(*self._start_of(node), *self._end_of(node))

    def span_between(self, first: ast.AST, last: ast.AST) -> Span:
        """From the start of `first` to the end of `last`."""
        return Span(*self._start_of(first), *self._end_of(last))

    def _start_of(self, node: ast.AST) -> tuple[int, int]:
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            return 0, 0
        line = lineno - 1
        return line, self.index.byte_to_char(line, getattr(node, "col_offset", 0) or 0)

    def _end_of(self, node: ast.AST) -> tuple[int, int]:
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            return 0, 0
        line = (getattr(node, "end_lineno", None) or lineno) - 1
        end_byte = getattr(node, "end_col_offset", None)
        if end_byte is None:
            return line, len(self.index.line(line))
        return line, self.index.byte_to_char(line, end_byte)

    def source_of(self, node: ast.AST) -> str:
        return self.text_in(self.span_of(node))

    def text_in(self, span: Span) -> str:
        if span.start_line == span.end_line:
            return self.index.line(span.start_line)[span.start_col : span.end_col]
        parts = [self.index.line(span.start_line)[span.start_col :]]
        for line in range(span.start_line + 1, span.end_line):
            parts.append(self.index.line(line))
        parts.append(self.index.line(span.end_line)[: span.end_col])
        return "\n".join(parts)

    def indentation_of(self, line: int) -> str:
        text = self.index.line(line)
        return text[: len(text) - len(text.lstrip(" \t"))]

    def line_break(self) -> str:
        """The document's own line ending, so inserted lines match the file's style."""
        for brk in self.index.breaks:
            if brk:
                return brk
        return "\n"


def parse_tolerant(text: str, index: LineIndex) -> tuple[ast.Module, list[SyntaxProblem]]:
    tree, problems, _ = _parse_tolerant(text, index)
    return tree, problems


def _parse_tolerant(text: str, index: LineIndex) -> tuple[ast.Module, list[SyntaxProblem], bool]:
    """The tree, the problems, and whether the tree is `ast.parse(text)` itself."""
    # NUL bytes make `ast.parse` refuse the whole file; a space keeps every column in place.
    nul = "\0" in text
    source = text.replace("\0", " ") if nul else text
    tree = _try_parse(source)
    if tree is not None:
        return tree, [], not nul
    problems: list[SyntaxProblem] = []
    body: list[ast.stmt] = []
    lines = list(index.lines)
    if "\0" in text:
        lines = [line.replace("\0", " ") for line in lines]
    for start, end in top_level_blocks(lines):
        body.extend(_parse_block(lines, start, end, problems))
    return ast.Module(body=body, type_ignores=[]), problems, False


def _try_parse(source: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            # invalid escape sequences and similar warnings are the user's business, not ours
            warnings.simplefilter("ignore")
            return ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def _syntax_error(source: str) -> SyntaxError | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source)
    except SyntaxError as error:
        return error
    except (ValueError, MemoryError, RecursionError) as error:
        return SyntaxError(str(error))
    return None


def top_level_blocks(lines: list[str]) -> list[tuple[int, int]]:
    """Split a file into runs of lines that each hold one or more whole top-level statements
    (see blocks.py)."""
    return scan(lines).blocks()


def _parse_block(
    lines: list[str], start: int, end: int, problems: list[SyntaxProblem]
) -> list[ast.stmt]:
    """Parse lines[start:end] at their real line numbers, repairing what does not parse."""
    block = lines[start:end]
    repaired = False
    for _ in range(MAX_REPAIRS_PER_BLOCK):
        # Leading newlines put every node at its real line number without renumbering.
        source = "\n" * start + "\n".join(block)
        error = _syntax_error(source)
        if error is None:
            tree = _try_parse(source)
            return tree.body if tree is not None else []
        if not repaired:
            problems.append(_problem_of(error))
            repaired = True
        if not _repair(block, start, error):
            break
    return []


def _problem_of(error: SyntaxError) -> SyntaxProblem:
    line = max(0, (error.lineno or 1) - 1)
    col = max(0, (error.offset or 1) - 1)
    return SyntaxProblem(line, col, error.msg or "invalid syntax")


def _repair(block: list[str], start: int, error: SyntaxError) -> bool:
    """Change the block so that the statement the error points at no longer breaks the rest.

    Every repair keeps the number of lines, so all other statements keep their positions.
    """
    message = error.msg or ""
    header = INDENTED_BLOCK_AFTER.search(message)
    if header:
        # `for x in loader:` with no body yet: give it one on the same line.
        offset = int(header.group(1)) - 1 - start
        if 0 <= offset < len(block) and "#" not in block[offset]:
            block[offset] = block[offset].rstrip() + " pass"
            return True
    offset = (error.lineno or 1) - 1 - start
    if not 0 <= offset < len(block):
        offset = len(block) - 1
    # An unclosed bracket is reported at its opening line; the statement runs to the end.
    if "was never closed" in message or "unexpected EOF" in message:
        return _blank_from(block, offset)
    if "unexpected indent" in message or "unindent does not match" in message:
        block[offset] = ""
        return True
    if block[offset].strip() in ("", "pass"):
        # The error lies on a line we cannot mend by itself: drop the statement before it.
        return _blank_previous_statement(block, offset)
    indent = block[offset][: len(block[offset]) - len(block[offset].lstrip(" \t"))]
    block[offset] = indent + "pass"
    return True


def _blank_from(block: list[str], offset: int) -> bool:
    """Replace the statement opened at `offset` by `pass`, with the lines that continue it.

    The continuation is taken to be the following lines indented deeper than the opener: while
    typing `loss = criterion(out,` the next statement usually sits at the opener's indentation.
    """
    indent = _indent(block[offset])
    changed = block[offset] != indent + "pass"
    block[offset] = indent + "pass"
    for position in range(offset + 1, len(block)):
        line = block[position]
        if not line.strip():
            continue
        if len(_indent(line)) <= len(indent) and not is_continuation(line.lstrip()):
            break
        block[position] = ""
        changed = True
    return changed


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _blank_previous_statement(block: list[str], offset: int) -> bool:
    for position in range(offset - 1, -1, -1):
        if block[position].strip() and block[position].strip() != "pass":
            indent = block[position][: len(block[position]) - len(block[position].lstrip(" \t"))]
            block[position] = indent + "pass"
            return True
    return False
