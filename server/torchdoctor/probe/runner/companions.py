"""The standard-library modules next to this package (COMPANION_MODULES), loaded by path.

The runner's own modules are a package loaded under a private name (see __main__.py); the
modules it shares with the client (the input grammar, precision plans, units...) sit one folder
up, in probe/, and are loaded from there under private names too.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types

RUNNER_DIR = os.path.dirname(os.path.abspath(__file__))
"""This package's folder (probe/runner)."""
PROBE_DIR = os.path.dirname(RUNNER_DIR)
"""The folder that holds it and the companion modules (probe/)."""


def companion_module(name: str) -> types.ModuleType:
    """A module shipped next to this package (COMPANION_MODULES), loaded by path under a
    private name: that folder is not on sys.path (see forget_runner_directory), and a user's own
    `input_spec.py` must neither shadow it nor be shadowed by it."""
    key = f"_torchdoctor_runner_{name}"
    loaded = sys.modules.get(key)
    if loaded is not None:
        return loaded
    path = os.path.join(PROBE_DIR, f"{name}.py")
    spec = importlib.util.spec_from_file_location(key, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a broken install
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


# Copied out of torchdoctor, the runner needs these files next to its folder (all standard
# library).
COMPANION_MODULES: tuple[str, ...] = (
    "input_spec", "init_args", "construct", "precision", "transformers_inputs"
)
COMPANION_MODULES += ("line_shapes", "batch_sweep")  # shapes by line, batch-size sweep
COMPANION_MODULES += (  # errors at the user's line, imports, runtime findings
    "import_roots", "pass_outcomes", "backward_origin", "view_layout", "build_origins",
    "unregistered_modules",
)
COMPANION_MODULES += ("units",)  # measurements as text, the same as the CLI's and the editor's
