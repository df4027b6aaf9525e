"""Which files `check` looks at: the paths given, folders recursed for *.py and *.ipynb, minus
excludes.

Only regular files are read. A symlink loop, a link to nothing, a FIFO or a device is reported
and skipped: opening a FIFO would block until someone writes to it, and a loop would make
every path operation on it fail.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

# Folders nobody wants linted: environments, caches, build output, vendored packages.
DEFAULT_EXCLUDES = (
    ".git/",
    ".hg/",
    ".venv/",
    "venv/",
    ".env/",
    "env/",
    "__pycache__/",
    ".tox/",
    ".nox/",
    ".mypy_cache/",
    ".ruff_cache/",
    ".pytest_cache/",
    "node_modules/",
    "site-packages/",
    "build/",
    "dist/",
    ".eggs/",
    "*.egg-info/",
    ".ipynb_checkpoints/",  # Jupyter's autosaved copies of the notebooks beside them
)
# Python files and Jupyter notebooks (their code cells, see reporting/notebook_checking.py)
CHECKED_SUFFIXES = (".py", ".ipynb")
FILE_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


@dataclass(frozen=True)
class SkippedPath:
    path: Path
    reason: str


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)
    skipped: list[SkippedPath] = field(default_factory=list)
    # the checked tree: the folders named and the folders of the files named, resolved; a fix
    # is written only to a file whose real location lies inside one of them
    roots: list[Path] = field(default_factory=list)


def discover(paths: Iterable[Path], excludes: Iterable[str], root: Path | None) -> Discovery:
    """Python files under `paths`; a file named explicitly is checked even if excluded."""
    spec = pathspec.PathSpec.from_lines("gitwildmatch", [*DEFAULT_EXCLUDES, *excludes])
    base = (root or Path.cwd()).resolve()
    found = Discovery()
    seen: set[Path] = set()

    def add(path: Path) -> None:
        problem = not_a_regular_file(path)
        if problem is not None:
            found.skipped.append(SkippedPath(path, problem))
            return
        resolved = path.resolve()
        if resolved not in seen:
            seen.add(resolved)
            found.files.append(path)

    for path in paths:
        if not path.is_dir():
            found.roots.append(path.absolute().parent.resolve())
            add(path)
            continue
        found.roots.append(path.resolve())
        for folder, subfolders, files in os.walk(path):
            folder_path = Path(folder)
            subfolders[:] = sorted(
                name
                for name in subfolders
                if not spec.match_file(_relative(folder_path / name, base) + "/")
            )
            for name in sorted(files):
                file_path = folder_path / name
                if name.endswith(CHECKED_SUFFIXES) and not spec.match_file(
                    _relative(file_path, base)
                ):
                    add(file_path)
    return found


def not_a_regular_file(path: Path) -> str | None:
    """Why `path` cannot be read as a source file, or None when it is a regular file."""
    try:
        info = os.stat(path)
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "a symbolic link loop; skipped"
        if error.errno == errno.ENOENT and os.path.islink(path):
            return f"a broken symbolic link (to {os.readlink(path)}); skipped"
        return f"cannot read: {error.strerror or error}"
    if stat.S_ISREG(info.st_mode):
        return None
    if stat.S_ISDIR(info.st_mode):
        return "a folder"
    kind = next((name for test, name in FILE_KINDS if test(info.st_mode)), "not a regular file")
    return f"{kind}, not a regular file; only regular files are checked"


def _relative(path: Path, base: Path) -> str:
    """The path relative to the configuration's folder, for matching excludes. The folder part
    is resolved, never the file itself: it may be a link loop or a link to nowhere."""
    try:
        return (path.parent.resolve() / path.name).relative_to(base).as_posix()
    except (ValueError, OSError, RuntimeError):
        return path.as_posix()


@dataclass(frozen=True)
class FileIdentity:
    """What tells whether a file changed between reading it and writing its fixes."""

    device: int
    inode: int
    size: int
    modified_ns: int

    @classmethod
    def of(cls, info: os.stat_result) -> FileIdentity:
        return cls(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


class NotARegularFile(OSError):
    pass


def read_source_file(path: str) -> tuple[bytes, FileIdentity]:
    """The file's bytes, without ever blocking: a FIFO put in a regular file's place after
    discovery is opened non-blocking and refused, not waited on."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    descriptor = os.open(path, flags | getattr(os, "O_BINARY", 0))
    with os.fdopen(descriptor, "rb") as stream:
        info = os.fstat(stream.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NotARegularFile(errno.EINVAL, "not a regular file")
        return stream.read(), FileIdentity.of(info)
