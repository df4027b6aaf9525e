"""`python path/to/probe/runner ...`: the runner started by its folder's path.

Python runs this file with the folder first on sys.path, where the runner's modules would
answer to short names (`timing`, `inputs`, `checks`...) for the user's own imports. The folder
is dropped from sys.path before anything else is imported, and loaded as a package under a
private name instead, so the runner's modules only ever import one another.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

PACKAGE = "torchdoctor_probe_runner"


def load_runner_package() -> ModuleType:
    """This folder as the package `torchdoctor_probe_runner` (rank_worker.py loads it the same
    way), wherever the probe folder was copied."""
    folder = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != folder]
    loaded = sys.modules.get(PACKAGE)
    if loaded is not None:
        return loaded
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        PACKAGE, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder]
    )
    if spec is None or spec.loader is None:  # pragma: no cover - a broken copy
        raise ImportError(f"cannot load the runner from {folder}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = module
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    code = int(load_runner_package().main())
    sys.stderr.flush()
    # Skip interpreter teardown: threads the user's code left running must not keep the
    # process (and the client waiting on it) alive, and torch's teardown is slow.
    os._exit(code)
