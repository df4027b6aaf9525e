"""Columns between the engine and the client, in plain values (no protocol types: the server's
first answers use these before the protocol library is loaded, see early_start.py).

The engine counts columns in code points; LSP clients count in the position encoding agreed at
`initialize` (UTF-16 unless the client offers UTF-8 or UTF-32; Neovim offers UTF-8 first).
Lines end at \\r\\n, \\r or \\n only, as LSP and the engine's LineIndex agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

UTF8 = "utf-8"
UTF16 = "utf-16"
UTF32 = "utf-32"
SUPPORTED_ENCODINGS = (UTF8, UTF16, UTF32)


def choose_encoding(offered: Any) -> str:
    """The encoding the server takes from the client's `general.positionEncodings`: the first
    one offered that it supports, else UTF-16 (which every client must support)."""
    if isinstance(offered, list):
        for encoding in offered:
            if encoding in SUPPORTED_ENCODINGS:
                return str(encoding)
    return UTF16


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


def client_position(lines: Sequence[str], line: int, col: int, encoding: str) -> tuple[int, int]:
    """An engine position (line, code-point column) as the client's (line, character)."""
    if line >= len(lines):
        # the engine uses (line_count, 0) for "the end of the document"
        last = len(lines) - 1
        return last, units_of(lines[last] if last >= 0 else "", encoding)
    text = lines[line] if line >= 0 else ""
    return line, char_to_client(text, col, encoding)
