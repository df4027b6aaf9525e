"""TD712: each private name the rule reports has a public twin in torch 2.13: the same object,
or (for `_LRScheduler`) a subclass that adds nothing."""

from __future__ import annotations

import importlib

import pytest
from torchdoctor.analysis import Config, check
from torchdoctor.analysis.rules.api_symbols import PRIVATE_ALIASES, PRIVATE_MODULES


def resolve(qualname: str):
    module_name, _, name = qualname.rpartition(".")
    return getattr(importlib.import_module(module_name), name)


@pytest.mark.parametrize("private", sorted(PRIVATE_ALIASES))
def test_public_twin_exists(private: str) -> None:
    public = PRIVATE_ALIASES[private][0]
    old, new = resolve(private), resolve(public)
    if isinstance(old, type):
        assert old is new or (issubclass(old, new) and set(vars(old)) <= {"__module__", "__doc__"})
    elif old is not new:
        # torch.compiler.* wrap torch._dynamo.* and take the same arguments
        assert public.startswith("torch.compiler.")
        assert callable(new)


@pytest.mark.parametrize("private", sorted(PRIVATE_MODULES))
def test_public_module_exports_the_same_names(private: str) -> None:
    old = importlib.import_module(private)
    new = importlib.import_module(PRIVATE_MODULES[private][0])
    for name in ("DTensor", "Shard", "Replicate", "distribute_tensor"):
        assert getattr(old, name) is getattr(new, name)


def test_rule_waits_for_the_public_name() -> None:
    source = "import torch\nclass S(torch.optim.lr_scheduler._LRScheduler):\n    pass\n"
    assert check(source, "x.py", Config(select=("TD712",), target_torch=(1, 13))) == []
    assert check(source, "x.py", Config(select=("TD712",), target_torch=(2, 0)))
