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


def decode_source(data: bytes) -> Source:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except (SyntaxError, LookupError):
        encoding = "utf-8"
    if encoding == "utf-8-sig" or data.startswith(b"\xef\xbb\xbf"):
        encoding = "utf-8-sig"
    try:
        return Source(data.decode(encoding), encoding, True)
    except (UnicodeDecodeError, LookupError):
        return Source(data.decode("utf-8", errors="replace"), "utf-8", False)
