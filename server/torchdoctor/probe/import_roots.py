"""The folders the user's imports are resolved from, as the project itself sees them.

Loaded by runner/ from the file next to it; standard library only.

`python -m src.models.net` from the project root finds `from src.models.layers import Block`;
a probe that only put the file's own folder on sys.path did not. The probe's sys.path starts
with the file's folder (sibling imports, as `python net.py` would) and then the project root:
the nearest folder above the file with a pyproject.toml, setup.py, setup.cfg or .git.
"""

from __future__ import annotations

import os

PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def project_root(path: str) -> str | None:
    """The nearest folder at or above the file's folder holding a project marker."""
    directory = os.path.dirname(os.path.abspath(path))
    while True:
        if any(os.path.exists(os.path.join(directory, marker)) for marker in PROJECT_MARKERS):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def import_roots(path: str) -> list[str]:
    """The file's folder, then the project root when it is another folder."""
    folder = os.path.dirname(os.path.abspath(path))
    root = project_root(path)
    return [folder] if root is None or root == folder else [folder, root]
