"""Which files `check` looks at: the paths given, folders recursed for *.py, minus excludes."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
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
)


def discover(paths: Iterable[Path], excludes: Iterable[str], root: Path | None) -> Iterator[Path]:
    """Python files under `paths`; a file named explicitly is checked even if excluded."""
    spec = pathspec.PathSpec.from_lines("gitwildmatch", [*DEFAULT_EXCLUDES, *excludes])
    base = (root or Path.cwd()).resolve()
    seen: set[Path] = set()
    for path in paths:
        if path.is_file():
            resolved = path.resolve()
            if resolved not in seen:
                seen.add(resolved)
                yield path
            continue
        for folder, subfolders, files in os.walk(path):
            folder_path = Path(folder)
            subfolders[:] = sorted(
                name
                for name in subfolders
                if not spec.match_file(_relative(folder_path / name, base) + "/")
            )
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                file_path = folder_path / name
                if spec.match_file(_relative(file_path, base)):
                    continue
                resolved = file_path.resolve()
                if resolved not in seen:
                    seen.add(resolved)
                    yield file_path


def _relative(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()
