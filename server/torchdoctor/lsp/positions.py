"""Positions between the engine and the client.

The engine counts columns in code points; LSP clients count in the position encoding agreed at
`initialize` (UTF-16 unless the client offers UTF-8 or UTF-32; Neovim offers UTF-8 first).
Lines end at \\r\\n, \\r or \\n only, as LSP and the engine's LineIndex agree.
"""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types

from ..analysis import Span

UTF8 = types.PositionEncodingKind.Utf8.value
UTF16 = types.PositionEncodingKind.Utf16.value
UTF32 = types.PositionEncodingKind.Utf32.value


def units_of(text: str, encoding: str) -> int:
    """How many code units of `encoding` the client counts for `text`."""
    if encoding == UTF32 or text.isascii():
        return len(text)
    if encoding == UTF8:
        return len(text.encode("utf-8", errors="surrogatepass"))
    return len(text.encode("utf-16-le", errors="surrogatepass")) // 2


def char_to_client(line_text: str, col: int, encoding: str) -> int:
    """Code-point column → client column on one line."""
    col = max(0, min(col, len(line_text)))
    return units_of(line_text[:col], encoding)


def client_to_char(line_text: str, units: int, encoding: str) -> int:
    """Client column → code-point column; a column inside a character snaps to its start and one
    past the end of the line clamps to the end (clients send both)."""
    if units <= 0:
        return 0
    if encoding == UTF32 or line_text.isascii():
        return min(units, len(line_text))
    count = 0
    for index, char in enumerate(line_text):
        width = units_of(char, encoding)
        if count + width > units:
            return index
        count += width
    return len(line_text)


class PositionMapper:
    """Converts engine spans to LSP ranges and LSP positions to engine positions for one text."""

    def __init__(self, lines: Sequence[str], encoding: str) -> None:
        self.lines = lines
        self.encoding = encoding

    def _line(self, line: int) -> str:
        return self.lines[line] if 0 <= line < len(self.lines) else ""

    def position(self, line: int, col: int) -> types.Position:
        if line >= len(self.lines):
            # the engine uses (line_count, 0) for "the end of the document"
            last = len(self.lines) - 1
            return types.Position(last, units_of(self._line(last), self.encoding))
        return types.Position(line, char_to_client(self._line(line), col, self.encoding))

    def range(self, span: Span) -> types.Range:
        return types.Range(
            self.position(span.start_line, span.start_col),
            self.position(span.end_line, span.end_col),
        )

    def to_char(self, position: types.Position) -> tuple[int, int]:
        """An LSP position as (line, code-point column), clamped into the document."""
        line = max(0, min(position.line, len(self.lines) - 1))
        return line, client_to_char(self._line(line), position.character, self.encoding)
