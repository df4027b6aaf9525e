"""How the server starts another Python (the torch-version look-up, jedi's inspection process)
so that no code from the user's folder, PYTHONPATH or user site runs in it.

A Python started with `-c` or `-m` puts its working folder first on `sys.path`; any Python reads
PYTHONPATH, PYTHONHOME and PYTHONSTARTUP from its environment and imports `sitecustomize` and
`usercustomize` from whatever is on that path. An editor may start the server inside the
workspace, or from a shell with `PYTHONPATH=.`: a workspace holding `sitecustomize.py` or a
`torch/` package would then run. Where we write the command line we pass `-I`; where jedi writes
it, we hand it an environment that means the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

# isolated mode: -E (no PYTHON* variables), -s (no user site) and -P (no script or current
# folder on sys.path); every Python torchdoctor supports (3.10+) has it
ISOLATED_FLAG = "-I"


def isolated_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` as a Python started with `-I` would read it, for a Python whose command line we
    do not write: every PYTHON* variable removed (what -E ignores), the user site turned off
    (-s) and the script's folder kept off `sys.path` (-P, Python 3.11+)."""
    # Windows spells variables in any case; Python reads them case-insensitively there
    kept = {name: value for name, value in environ.items() if not name.upper().startswith("PYTHON")}
    kept["PYTHONNOUSERSITE"] = "1"
    kept["PYTHONSAFEPATH"] = "1"
    return kept


def neutral_directory() -> str:
    """A working folder for child processes that is nobody's project: the folder of torchdoctor
    itself, whose code already runs in the server."""
    return str(Path(__file__).resolve().parent)
