"""Engine spans as protocol ranges and back, for one text (the columns themselves: columns.py)."""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types

from ..analysis import Span
from .columns import client_position, client_to_char


class PositionMapper:
    """Converts engine spans to LSP ranges and LSP positions to engine positions for one text."""

    def __init__(self, lines: Sequence[str], encoding: str) -> None:
        self.lines = lines
        self.encoding = encoding

    def _line(self, line: int) -> str:
        return self.lines[line] if 0 <= line < len(self.lines) else ""

    def position(self, line: int, col: int) -> types.Position:
        return types.Position(*client_position(self.lines, line, col, self.encoding))

    def range(self, span: Span) -> types.Range:
        return types.Range(
            self.position(span.start_line, span.start_col),
            self.position(span.end_line, span.end_col),
        )

    def to_char(self, position: types.Position) -> tuple[int, int]:
        """An LSP position as (line, code-point column), clamped into the document."""
        line = max(0, min(position.line, len(self.lines) - 1))
        return line, client_to_char(self._line(line), position.character, self.encoding)
