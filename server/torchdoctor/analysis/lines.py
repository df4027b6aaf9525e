"""Line index: converts between UTF-8 byte columns (what `ast` reports), code-point columns
(what the analysis uses) and UTF-16 code units (what LSP clients count by default)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Python and LSP agree that a line ends at \r\n, \r or \n; str.splitlines() also splits at
# \x0b, \x0c, \x1c-\x1e, \x85, \u2028 and \u2029, which would put every later line off by one.
LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINE_AND_BREAK = re.compile(r"(\r\n|\r|\n)")


@dataclass(frozen=True)
class LineIndex:
    lines: tuple[str, ...]  # without their line breaks
    breaks: tuple[str, ...]  # the break that ends each line ("" for the last)
    ascii_lines: tuple[bool, ...]

    @classmethod
    def of(cls, text: str) -> LineIndex:
        if "\r" not in text:  # the usual case: str.split is many times faster than the regex
            lines = tuple(text.split("\n"))
            breaks = ("\n",) * (len(lines) - 1) + ("",)
        else:
            # one split in C, keeping the breaks: line, break, line, break, ..., last line
            parts = _LINE_AND_BREAK.split(text)
            lines = tuple(parts[0::2])
            breaks = (*parts[1::2], "")
        # one check in C for the usual all-ASCII file instead of one per line
        ascii_lines = (
            (True,) * len(lines) if text.isascii() else tuple(line.isascii() for line in lines)
        )
        return cls(lines, breaks, ascii_lines)

    @property
    def line_count(self) -> int:
        return len(self.lines)

    def line(self, line: int) -> str:
        """The text of a 0-based line, or "" past the end."""
        if 0 <= line < len(self.lines):
            return self.lines[line]
        return ""

    def clamp(self, line: int, col: int) -> tuple[int, int]:
        """The nearest position that lies inside the document."""
        if line < 0:
            return 0, 0
        if line >= len(self.lines):
            last = len(self.lines) - 1
            return last, len(self.lines[last])
        return line, max(0, min(col, len(self.lines[line])))

    def byte_to_char(self, line: int, byte_col: int) -> int:
        """Convert a UTF-8 byte column on a 0-based line to a code-point column."""
        if not 0 <= line < len(self.lines):
            return 0
        if self.ascii_lines[line]:
            return min(byte_col, len(self.lines[line]))
        encoded = self.lines[line].encode("utf-8", errors="surrogatepass")
        return len(encoded[:byte_col].decode("utf-8", errors="ignore"))

    def char_to_utf16(self, line: int, col: int) -> int:
        if not 0 <= line < len(self.lines) or self.ascii_lines[line]:
            return col
        prefix = self.lines[line][:col]
        return len(prefix.encode("utf-16-le", errors="surrogatepass")) // 2

    def utf16_to_char(self, line: int, units: int) -> int:
        if not 0 <= line < len(self.lines):
            return units
        text = self.lines[line]
        if self.ascii_lines[line]:
            return min(units, len(text))
        count = 0
        for index, char in enumerate(text):
            if count >= units:
                return index
            count += 2 if ord(char) > 0xFFFF else 1
        return len(text)

    def offset(self, line: int, col: int) -> int:
        """Code-point offset into the full text of a (line, col) position."""
        line, col = self.clamp(line, col)
        total = 0
        for index in range(line):
            total += len(self.lines[index]) + len(self.breaks[index])
        return total + col

    def offsets(self) -> list[int]:
        """The offset at which each line starts; computed once per caller that needs many."""
        starts = [0]
        for index in range(len(self.lines) - 1):
            starts.append(starts[-1] + len(self.lines[index]) + len(self.breaks[index]))
        return starts
