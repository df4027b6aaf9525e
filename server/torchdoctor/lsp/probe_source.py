"""The file the probe imports for an open document.

The runner imports a file from disk, but the editor's text may be unsaved. When it differs from
the file, the text is written to a hidden-by-name copy in the same folder (so the user's sibling
imports and package-relative imports still resolve), and every path in the runner's answer is
mapped back to the user's file. The copy has the same lines, so line numbers need no mapping.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

COPY_PREFIX = "_torchdoctor_probe_"


@dataclass(frozen=True)
class ProbeSource:
    user_path: str  # what the user reads in errors and the report: their file (or the URI)
    probe_path: str  # what the runner imports
    aliases: tuple[str, ...] = ()  # spellings of probe_path the runner may report

    def to_user(self, value: Any) -> Any:
        """`value` (a decoded JSON report or error) with the copy's path replaced by the user's."""
        if not self.aliases:
            return value
        if isinstance(value, str):
            for alias in self.aliases:
                value = value.replace(alias, self.user_path)
            return value
        if isinstance(value, list):
            return [self.to_user(item) for item in value]
        if isinstance(value, dict):
            return {key: self.to_user(item) for key, item in value.items()}
        return value


@contextlib.contextmanager
def probe_source(path: str | None, text: str | None, display: str) -> Iterator[ProbeSource]:
    """The file to probe for a document at `path` (None when it has none) whose editor text is
    `text` (None: use the file as saved). `display` names an unsaved document in messages."""
    if text is None and (path is None or not os.path.isfile(path)):
        raise FileNotFoundError(f"{display} is not open in the editor and not on disk")
    if path is not None and (text is None or _on_disk(path) == text):
        yield ProbeSource(user_path=path, probe_path=path)
        return
    assert text is not None
    folder, own_folder = _copy_folder(path)
    stem = re.sub(r"\W", "_", Path(path).stem if path else "untitled")
    copy = os.path.join(folder, f"{COPY_PREFIX}{stem}_{secrets.token_hex(4)}.py")
    try:
        with open(copy, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        aliases = tuple(dict.fromkeys((copy, os.path.realpath(copy))))
        yield ProbeSource(user_path=path or display, probe_path=copy, aliases=aliases)
    finally:
        _remove_copy(copy)
        if own_folder:
            shutil.rmtree(folder, ignore_errors=True)


def _on_disk(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def _copy_folder(path: str | None) -> tuple[str, bool]:
    """The user's folder when it exists and is writable, else a private temporary one (sibling
    imports then fail, which the error message shows)."""
    if path is not None:
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(folder) and os.access(folder, os.W_OK):
            return folder, False
    return tempfile.mkdtemp(prefix="torchdoctor-probe-"), True


def _remove_copy(copy: str) -> None:
    """The copy and the bytecode the import left for it in __pycache__."""
    with contextlib.suppress(OSError):
        os.remove(copy)
    cache = Path(copy).parent / "__pycache__"
    if cache.is_dir():
        for compiled in cache.glob(f"{Path(copy).stem}.*.pyc"):
            with contextlib.suppress(OSError):
                compiled.unlink()
