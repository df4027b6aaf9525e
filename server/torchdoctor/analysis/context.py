"""What a rule sees: the document, its semantics, the configuration, and a way to report."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .config import Config
from .document import Document
from .findings import REGISTRY, Edit, Finding, Fix, Span
from .semantics import Semantics


@dataclass(frozen=True)
class RuleContext:
    doc: Document
    sem: Semantics
    config: Config

    @property
    def torch_version(self) -> tuple[int, int]:
        return self.config.torch_version

    def finding(
        self, code: str, where: ast.AST | Span, message: str, fix: Fix | None = None
    ) -> Finding:
        """A finding of rule `code` at a node or span, named and graded from the registry."""
        info = REGISTRY.infos[code]
        span = where if isinstance(where, Span) else self.doc.span_of(where)
        return Finding(code, info.name, message, span, info.severity, fix)

    # ---- building fixes ---------------------------------------------------------------------
    def replace(self, node: ast.AST | Span, content: str) -> Edit:
        span = node if isinstance(node, Span) else self.doc.span_of(node)
        return Edit(span, content)

    def operand_source(self, node: ast.AST) -> str:
        """The source of `node`, parenthesised unless it is a name, attribute, call, subscript
        or constant: text that stays one operand wherever a fix puts it."""
        text = self.doc.source_of(node)
        if isinstance(node, ast.Name | ast.Attribute | ast.Call | ast.Subscript | ast.Constant):
            return text
        return f"({text})"

    def insert_before(self, node: ast.AST, content: str) -> Edit:
        span = self.doc.span_of(node)
        return Edit(Span(span.start_line, span.start_col, span.start_line, span.start_col), content)

    def insert_after(self, node: ast.AST, content: str) -> Edit:
        span = self.doc.span_of(node)
        return Edit(Span(span.end_line, span.end_col, span.end_line, span.end_col), content)

    def insert_line_before(self, statement: ast.stmt, line_text: str) -> Edit:
        """Insert `line_text` as a whole line above `statement`, at its indentation."""
        span = self.doc.span_of(statement)
        indent = self.doc.indentation_of(span.start_line)
        return Edit(
            Span(span.start_line, 0, span.start_line, 0),
            f"{indent}{line_text}{self.doc.line_break()}",
        )

    def statement_owns_lines(self, statement: ast.stmt) -> bool:
        """True when nothing but this statement (and a comment) stands on its lines."""
        span = self.doc.span_of(statement)
        before = self.doc.index.line(span.start_line)[: span.start_col]
        after = self.doc.index.line(span.end_line)[span.end_col :].strip()
        return not before.strip() and (not after or after.startswith("#"))

    def delete_lines_of(self, statement: ast.stmt) -> Edit:
        """Remove the whole lines a statement stands on (use after statement_owns_lines)."""
        span = self.doc.span_of(statement)
        return Edit(Span(span.start_line, 0, span.end_line + 1, 0), "")

    def starts_its_line(self, node: ast.AST) -> bool:
        """True when only indentation stands before `node` on its first line."""
        span = self.doc.span_of(node)
        return not self.doc.index.line(span.start_line)[: span.start_col].strip()

    def is_single_line_statement(self, statement: ast.stmt) -> bool:
        """A statement alone on one line (a trailing comment allowed): it can be moved whole."""
        return statement.lineno == statement.end_lineno and self.statement_owns_lines(statement)

    def line_of_statement(self, statement: ast.stmt) -> str:
        """A one-line statement's text with its trailing comment: what moving it must carry,
        since deleting its line deletes the comment too."""
        span = self.doc.span_of(statement)
        return self.doc.index.line(span.start_line)[span.start_col :].rstrip()

    def move_line_before(self, statement: ast.stmt, anchor: ast.stmt) -> tuple[Edit, Edit]:
        """Edits that move a single-line statement (with its comment) above `anchor`."""
        return (
            self.insert_line_before(anchor, self.line_of_statement(statement)),
            self.delete_lines_of(statement),
        )

    def move_line_after(self, statement: ast.stmt, anchor: ast.stmt) -> tuple[Edit, Edit]:
        """Edits that move a single-line statement (with its comment) below `anchor`, at the
        anchor's indentation."""
        anchor_span = self.doc.span_of(anchor)
        end_line = anchor_span.end_line
        line_end = len(self.doc.index.line(end_line))
        indent = self.doc.indentation_of(anchor_span.start_line)
        moved = self.line_of_statement(statement)
        insert = Edit(
            Span(end_line, line_end, end_line, line_end), f"{self.doc.line_break()}{indent}{moved}"
        )
        return (insert, self.delete_lines_of(statement))
