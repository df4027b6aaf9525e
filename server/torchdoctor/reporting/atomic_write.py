"""Replacing a file's contents so that a reader sees the old bytes or the new, never a mix.

The new bytes go to a temporary file in the same folder (so the rename cannot cross file
systems), are flushed to the disk, get the original's permission bits, and are renamed over the
original. A full disk, a quota or an interruption before the rename leaves the original as it
was, byte for byte, and removes the temporary file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

TEMPORARY_SUFFIX = ".torchdoctor-tmp"


def write_atomically(path: Path, data: bytes) -> None:
    """Replace the regular file `path` (not a symlink: pass the resolved target) with `data`."""
    original = os.stat(path)
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX
    )
    try:
        try:
            _write_all(descriptor, data)
            # mkstemp made it private (0600): give it the original's permission bits
            os.chmod(temporary, stat.S_IMODE(original.st_mode))
            if hasattr(os, "fchown"):
                with contextlib.suppress(PermissionError):  # only root may give a file away
                    os.fchown(descriptor, original.st_uid, original.st_gid)
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _sync_folder(path.parent)


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(descriptor, view)
        view = view[written:]


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable; some systems cannot open a folder, which is fine."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(descriptor)
    finally:
        os.close(descriptor)
