"""TD712: each private name the rule reports has a public twin in torch 2.13: the same object,
or (for `_LRScheduler`) a subclass that adds nothing."""

from __future__ import annotations

import importlib

import pytest
from torchdoctor.analysis import Config, check
from torchdoctor.analysis.rules.api.symbols import PRIVATE_ALIASES, PRIVATE_MODULES


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


def test_one_finding_per_name_and_its_fix_keeps_every_use_working() -> None:
    """Reported once per private name (at the import, else at the first use); applying the
    fixes gives a file that runs under torch and computes what the private names did."""
    import torch
    from torchdoctor.reporting.checking import check_source

    source = (
        "import torch\n"
        "from torch.utils.data._utils.collate import default_collate\n"
        "from torch.optim.lr_scheduler import _LRScheduler\n"
        "class Warmup(_LRScheduler):\n"
        "    def get_lr(self):\n"
        "        return [base * 0.5 for base in self.base_lrs]\n"
        "batch = default_collate([torch.ones(2), torch.zeros(2)])\n"
        "pairs = default_collate([(1, 2.0), (3, 4.0)])\n"
        "torch._dynamo.reset()\n"
        "torch._dynamo.reset()\n"
    )
    config = Config(select=("TD712",))
    assert sorted(f.span.start_line + 1 for f in check(source, "x.py", config)) == [2, 3, 9]
    fixed = check_source(source.encode(), "x.py", config, "fix", True).fixed_text
    assert "_utils" not in fixed and "_dynamo" not in fixed and "import LRScheduler" in fixed
    assert check(fixed, "x.py", config) == []
    namespace: dict = {}
    exec(compile(fixed, "fixed.py", "exec"), namespace)
    assert torch.equal(namespace["batch"], torch.tensor([[1.0, 1.0], [0.0, 0.0]]))
    assert [t.tolist() for t in namespace["pairs"]] == [[1, 3], [2.0, 4.0]]
    parameter = torch.nn.Parameter(torch.ones(1))
    scheduler = namespace["Warmup"](torch.optim.SGD([parameter], lr=0.2))
    assert scheduler.get_last_lr() == [0.1]
