"""Replacing a file's contents so that a reader sees the old bytes or the new, never a mix.

The new bytes go to a temporary file in the same folder (so the rename cannot cross file
systems), are flushed to the disk, get the original's permission bits, and are renamed over the
original. A full disk, a quota or an interruption before the rename leaves the original as it
was, byte for byte, and removes the temporary file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

TEMPORARY_SUFFIX = ".torchdoctor-tmp"
# created here or not at all, never followed through a link, bytes as they are (Windows'
# text mode would translate line ends), private until the chmod below
_CREATE_NEW = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace the regular file `path` (not a symlink: pass the resolved target) with `data`."""
    original = os.stat(path)
    # The temporary file's name is chosen before it is created, inside the `try` that removes
    # it: a signal handled as the file comes into being (between `open` returning and its
    # result being stored, where `tempfile.mkstemp` would leave it behind) still finds it.
    while True:
        temporary = path.parent / f".{path.name}.{secrets.token_hex(6)}{TEMPORARY_SUFFIX}"
        try:
            descriptor = os.open(temporary, _CREATE_NEW, 0o600)
        except FileExistsError:
            continue  # another file has that name (never ours): pick another
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        break
    try:
        try:
            _write_all(descriptor, data)
            # created private (0600): give it the original's permission bits
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
