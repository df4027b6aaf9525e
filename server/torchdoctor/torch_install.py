"""Which torch release an interpreter has installed, read from its package metadata.

Rules whose truth depends on the torch version (TD702, the deprecations, the amp move) check
against `target-torch` from the configuration, else this version, else the newest release.
torch is never imported: that costs seconds, and the interpreter may be one torchdoctor does not
run in (the editor's `interpreter` setting). The interpreter is asked only for its `sys.path`,
once, in isolated mode (no code from the working folder, PYTHONPATH or the user site runs); its
`torch-*.dist-info/METADATA` gives the version.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from .isolation import ISOLATED_FLAG, neutral_directory

TorchVersion = tuple[int, int]

# "Version: 2.4.1+cu121" -> (2, 4)
_VERSION_LINE = re.compile(r"^Version:\s*(\d+)\.(\d+)", re.MULTILINE)
_ASK_TIMEOUT_S = 10
# Run with -I, so it sees no user site; a plain run of the interpreter outside a virtual
# environment would import from there too, so its folder is listed (read for metadata only, never
# put on the path) just before the site-packages, where site would put it.
_SYS_PATH_SCRIPT = """\
import json, site, sys
path = list(sys.path)
if sys.prefix == sys.base_prefix:
    system = set(site.getsitepackages())
    at = next((i for i, entry in enumerate(path) if entry in system), len(path))
    path.insert(at, site.getusersitepackages())
print(json.dumps(path))
"""


def installed_torch_version(interpreter: str | None = None) -> TorchVersion | None:
    """The (major, minor) torch release of `interpreter` (None: the running one), or None when
    it has no torch or cannot be asked."""
    if interpreter is None or (_path_is_the_interpreters_own() and _same_interpreter(interpreter)):
        return _running_version()
    executable = _absolute_executable(interpreter)
    return _version_of_interpreter(executable) if executable is not None else None


def _absolute_executable(interpreter: str) -> str | None:
    """A bare name (`python3`) is looked up on PATH, as a shell would, never taken from the
    working folder, which may be the user's project."""
    if os.sep in interpreter or (os.altsep is not None and os.altsep in interpreter):
        return str(Path(interpreter).absolute())
    return shutil.which(interpreter)


# The language server asks on every analysis: each answer is worked out once per process.
@lru_cache(maxsize=1)
def _running_version() -> TorchVersion | None:
    return torch_version_in(sys.path)


def torch_version_in(search_path: Iterable[str]) -> TorchVersion | None:
    """The version of the first torch distribution on `search_path`, as import would find it."""
    for entry in search_path:
        folder = Path(entry or ".")
        try:
            candidates = sorted(folder.glob("torch-*.dist-info"))
        except OSError:
            continue
        for dist_info in candidates:
            try:
                metadata = (dist_info / "METADATA").read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            match = _VERSION_LINE.search(metadata)
            if match:
                return int(match.group(1)), int(match.group(2))
    return None


def _path_is_the_interpreters_own() -> bool:
    """This process's sys.path is the one the interpreter's scripts get: the language server runs
    with -I -S (no site-packages, no user site, no PYTHONPATH) and must ask instead."""
    flags = sys.flags
    return not (flags.no_site or flags.no_user_site or flags.ignore_environment)


@lru_cache(maxsize=8)
def _same_interpreter(interpreter: str) -> bool:
    try:
        return Path(interpreter).resolve() == Path(sys.executable).resolve()
    except OSError:
        return False


@lru_cache(maxsize=8)
def _version_of_interpreter(interpreter: str) -> TorchVersion | None:
    try:
        completed = subprocess.run(
            [interpreter, ISOLATED_FLAG, "-c", _SYS_PATH_SCRIPT],
            cwd=neutral_directory(),
            capture_output=True,
            text=True,
            timeout=_ASK_TIMEOUT_S,
            check=True,
        )
        search_path = json.loads(completed.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    if not isinstance(search_path, list):
        return None
    return torch_version_in(str(entry) for entry in search_path)
