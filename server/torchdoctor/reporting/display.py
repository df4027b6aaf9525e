"""File names as the outputs can carry them.

A name can hold a newline (which would split a `path:line:col:` line in two), terminal escape
sequences, bidirectional-text controls, or bytes that are not UTF-8 (Python keeps those as lone
surrogates, which no UTF-8 output and no strict JSON parser accepts). Each output escapes what
it cannot carry, as `\\n`, `\\x1b`, `\\u202e`; an undecodable byte shows as `\\xff`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from urllib.parse import quote

# categories that must not reach a terminal raw: controls, lone surrogates, line separators
UNSAFE_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})
# the bidirectional embeddings, overrides and isolates: they reorder how the rest reads
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# the characters a URI path segment may hold as they are (RFC 3986 pchar, plus the separator)
URI_SAFE = "/:@!$&'()*+,;=-._~"


def display_path(path: str) -> str:
    """The name for text a terminal shows (text output, error messages, diff headers)."""
    return _escaped(path, _unsafe_for_terminal)


def json_path(path: str) -> str:
    """The name for JSON: only undecodable bytes need escaping, json itself escapes controls."""
    return _escaped(path, _is_surrogate)


def uri_path(path: str) -> str:
    """The name as a relative URI reference (SARIF): the file system's bytes, percent-encoded."""
    raw = path.replace("\\", "/").encode("utf-8", errors="surrogateescape")
    return quote(raw, safe=URI_SAFE)


def _escaped(path: str, unsafe: Callable[[str], bool]) -> str:
    if not any(unsafe(char) for char in path):
        return path
    # once anything is escaped, a backslash is too, so `a\nb` and a newline stay distinct
    return "".join(_escape(char) if char == "\\" or unsafe(char) else char for char in path)


def _unsafe_for_terminal(char: str) -> bool:
    return unicodedata.category(char) in UNSAFE_CATEGORIES or char in BIDI_CONTROLS


def _is_surrogate(char: str) -> bool:
    return 0xD800 <= ord(char) <= 0xDFFF


def _escape(char: str) -> str:
    if char == "\\":
        return "\\\\"
    if char in NAMED_ESCAPES:
        return NAMED_ESCAPES[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"  # a byte that was not UTF-8 (surrogateescape)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"
