"""One lock around `ast.parse` for the whole server process.

CPython keeps the recursion depth of its AST-to-Python converter in per-interpreter state, so two
threads calling `ast.parse` at the same time can fail with "SystemError: AST constructor
recursion depth mismatch" (python/cpython#106905; seen here on 3.11.7). The server parses in
worker threads, and jedi parses on its own thread too (parso's `literal_eval` goes through
`ast.parse`), so every caller has to take the same lock: `ast.parse` itself is wrapped, which
also covers `ast.literal_eval`, which looks `parse` up in the ast module at each call.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

_LOCK = threading.Lock()
_MARK = "_torchdoctor_serialised"


def serialise_ast_parse() -> None:
    """Make `ast.parse` take a process-wide lock (idempotent). Parsing is a few milliseconds per
    thousand lines, so the lock costs nothing noticeable."""
    if getattr(ast.parse, _MARK, False):
        return
    original = ast.parse

    def parse(*args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return original(*args, **kwargs)

    parse.__doc__ = original.__doc__
    setattr(parse, _MARK, True)
    ast.parse = parse
