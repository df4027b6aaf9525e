"""TD714: `import pkg.mod as mod` and `from pkg import mod` bind the same module object."""

from __future__ import annotations

from .test_td701 import import_torchvision


def test_alias_import_is_the_same_module() -> None:
    import_torchvision()
    import torchvision.models as models_by_alias
    from torchvision import models

    assert models_by_alias is models


def test_same_for_torch_itself() -> None:
    import torch.nn as nn_by_alias
    from torch import nn

    assert nn_by_alias is nn
