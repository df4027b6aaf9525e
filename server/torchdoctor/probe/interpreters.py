"""Which Python a probe (and the version-dependent rules) ask: found without starting it."""

from __future__ import annotations

import os
import shutil
import sys


def probe_interpreter(setting: str) -> str:
    """The interpreter the probe runs in: the setting, else the active virtual or conda
    environment (as jedi picks it), else the server's own Python."""
    if setting:
        return setting
    scripts, name = ("Scripts", "python.exe") if os.name == "nt" else ("bin", "python")
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        root = os.environ.get(variable)
        if root:
            candidate = resolve_interpreter(os.path.join(root, scripts, name))
            if candidate is not None:
                return candidate
    return sys.executable


def resolve_interpreter(python: str) -> str | None:
    """An absolute path to an executable interpreter, or None. Symlinks are kept: a venv's
    python is a link to the base interpreter, and resolving it would lose the venv."""
    if not python or "\x00" in python:
        return None
    candidate = python if os.sep in python else shutil.which(python)
    if candidate is None:
        return None
    candidate = os.path.abspath(candidate)
    if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
        return candidate
    return None
