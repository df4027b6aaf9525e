"""The file the probe imports for an open document.

The runner imports a file from disk, but the editor's text may be unsaved. When it differs from
the file, the text is written to a copy in a private temporary folder, never in the user's
folder: the runner is told the user's file (`origin`) and resolves sibling and package-relative
imports from there. Every path in the runner's answer is mapped back to the user's file; the
copy has the same lines, so line numbers need no mapping.

The copy is removed when the probe ends. A server that is killed cannot do that, so each new
copy first removes the folders that servers no longer running left behind (each folder is
named after the process that made it).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

COPY_PREFIX = "_torchdoctor_probe_"
FOLDER_PREFIX = "torchdoctor-probe-"  # then the pid of the server that made it, and a suffix


@dataclass(frozen=True)
class ProbeSource:
    user_path: str  # what the user reads in errors and the report: their file (or the URI)
    probe_path: str  # what the runner imports
    aliases: tuple[str, ...] = ()  # spellings of probe_path the runner may report
    origin: str | None = None  # the user's file on disk when probe_path is a copy of its text

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
    remove_abandoned_copies()
    folder = tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-")
    stem = re.sub(r"\W", "_", Path(path).stem if path else "untitled")
    copy = os.path.join(folder, f"{COPY_PREFIX}{stem}.py")
    try:
        with open(copy, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        aliases = tuple(dict.fromkeys((copy, os.path.realpath(copy))))
        origin = os.path.abspath(path) if path is not None else None
        yield ProbeSource(
            user_path=path or display, probe_path=copy, aliases=aliases, origin=origin
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _on_disk(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def remove_abandoned_copies(temporary: str | None = None) -> list[str]:
    """Remove the copy folders whose server process is gone; returns the folders removed.
    Only folders this user owns are touched."""
    root = temporary or tempfile.gettempdir()
    removed: list[str] = []
    if os.name == "nt":  # os.kill(pid, 0) is no liveness test there; the OS cleans %TEMP%
        return removed
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        owner = _owner_pid(entry.name)
        if owner is None or _process_exists(owner):
            continue
        with contextlib.suppress(OSError):
            if not entry.is_dir(follow_symlinks=False) or entry.stat().st_uid != os.getuid():
                continue
            shutil.rmtree(entry.path)
            removed.append(entry.path)
    return removed


def _owner_pid(name: str) -> int | None:
    if not name.startswith(FOLDER_PREFIX):
        return None
    pid, _, _suffix = name[len(FOLDER_PREFIX) :].partition("-")
    return int(pid) if pid.isdigit() else None


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # alive, under another user (or we cannot tell: keep its folder)
    return True
