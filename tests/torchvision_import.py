"""`import torchvision` in the test environment, where its compiled operators cannot load.

No torchvision wheel in the registries the tests install from matches the CPU build of torch
2.13.0: PyPI's torchvision==0.28.0 is linked against the CUDA libraries of torch
(`libtorch_cuda.so`, `libc10_cuda.so`), so its `_C.so` does not load beside the CPU build, and
`torchvision/_meta_registrations.py` then fails at import with `RuntimeError: operator
torchvision::nms does not exist`. That module only registers fake (meta) kernels for the
detection operators (nms, roi_align, ...); the model builders, layers and transforms the tests
use are plain Python over torch. Where the real import fails that way, the module is replaced by
an empty one and torchvision imported again; anything that calls a compiled operator still
raises. Where torchvision imports normally (a matching build), nothing is replaced.

Imported by the probe fixtures too: the probe runs them in another process, whose import roots
include the project root (see probe/import_roots.py)."""

from __future__ import annotations

import sys
import types

STUBBED = "torchvision._meta_registrations"


def import_torchvision() -> types.ModuleType:
    """torchvision, with its meta registrations left out where they cannot load. Raises
    ImportError when torchvision is not installed."""
    try:
        import torchvision
    except RuntimeError as error:
        if "torchvision::" not in str(error):
            raise
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]
        sys.modules[STUBBED] = types.ModuleType(STUBBED)
        import torchvision
    return torchvision


def importable() -> bool:
    """Whether torchvision imports (after the fallback above)."""
    try:
        import_torchvision()
    except ImportError:
        return False
    return True
