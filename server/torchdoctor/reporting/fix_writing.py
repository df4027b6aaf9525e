"""Writing `--fix` results: only inside the checked tree, only over the bytes that were read."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from .atomic_write import write_atomically
from .display import display_path
from .files import FileIdentity


def write_fixed_file(
    path: str, data: bytes, read_as: FileIdentity, roots: Sequence[Path]
) -> str | None:
    """Write the fixed bytes of the file checked at `path`; why they were not written, or None.

    A symlink is written through (the link stays a link) when its target lies inside one of
    `roots`, the folders being checked; a link out of them is left alone, as is a file that
    changed since it was read (an editor saved it meanwhile) or is read-only.
    """
    target = Path(os.path.realpath(path))
    if not any(target.is_relative_to(root) for root in roots):
        return (
            f"a symbolic link to {display_path(str(target))}, outside the checked folders; "
            "fixes were not written"
        )
    if not os.access(target, os.W_OK):
        # a rename would replace it anyway; a read-only file says it is not to be changed
        return "read-only; fixes were not written"
    try:
        if FileIdentity.of(os.stat(target)) != read_as:
            return "changed on disk while it was checked; fixes were not written"
        write_atomically(target, data)
    except OSError as error:
        return f"cannot write fixes: {error.strerror or error}; the file was left as it was"
    return None
