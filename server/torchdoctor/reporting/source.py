"""Reading source files the way Python does (PEP 263 encodings), without ever failing."""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    text: str
    encoding: str
    # False when the bytes were not valid in their declared encoding: the text then holds
    # replacement characters, so writing fixes back would damage the file.
    exact: bool
    # where the first byte that is not valid in `encoding` sits, as (0-based line, column in
    # `text`); None when the text is exact
    bad_position: tuple[int, int] | None = None

    def encode(self, text: str) -> bytes:
        """`text` in the source's own encoding (a BOM comes back with `utf-8-sig`)."""
        return text.encode(self.encoding)


def decode_source(data: bytes) -> Source:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except (SyntaxError, LookupError):
        encoding = "utf-8"
    if encoding == "utf-8-sig" or data.startswith(b"\xef\xbb\xbf"):
        encoding = "utf-8-sig"
    try:
        return Source(data.decode(encoding), encoding, True)
    except UnicodeDecodeError as error:
        bad_offset = error.start
    except LookupError:
        bad_offset = 0
    # the encoding stays the declared one, for messages: inexact text is never written back
    text = data.decode("utf-8", errors="replace")
    return Source(text, encoding, False, _position(data, bad_offset))


def _position(data: bytes, offset: int) -> tuple[int, int]:
    line_start = data.rfind(b"\n", 0, offset) + 1
    line = data.count(b"\n", 0, offset)
    column = len(data[line_start:offset].decode("utf-8", errors="replace"))
    return line, column
