"""TD709: torch 2.13 still warns (it does not raise) when `use_reentrant` is left out, and the
implicit default is the reentrant variant, which gives no gradients to the checkpointed block's
parameters when no input requires grad."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.utils.checkpoint import checkpoint, checkpoint_sequential
from torchdoctor.analysis import Config, check

WARNING = (
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting "
    "in PyTorch 2.9, calling checkpoint without use_reentrant will raise an exception. "
    "use_reentrant=False is recommended, but if you need to preserve the current default "
    "behavior, you can pass use_reentrant=True. Refer to docs for more details on the "
    "differences between the two variants."
)


def test_missing_use_reentrant_warns_but_does_not_raise() -> None:
    block = torch.nn.Linear(3, 3)
    x = torch.ones(1, 3, requires_grad=True)
    with pytest.warns(UserWarning) as caught:
        out = checkpoint(block, x)
    assert WARNING in [str(w.message) for w in caught]
    out.sum().backward()
    assert block.weight.grad is not None


def test_checkpoint_sequential_warns_too() -> None:
    layers = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    with pytest.warns(UserWarning, match="checkpoint_sequential: the use_reentrant parameter"):
        checkpoint_sequential(layers, 2, torch.ones(1, 2, requires_grad=True))


def test_explicit_use_reentrant_is_silent() -> None:
    block = torch.nn.Linear(3, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checkpoint(block, torch.ones(1, 3, requires_grad=True), use_reentrant=False)


def test_the_default_is_reentrant_and_drops_parameter_gradients() -> None:
    block = torch.nn.Linear(3, 3)
    x = torch.ones(1, 3)  # e.g. the embedding output of a frozen layer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        implicit = checkpoint(block, x)
        reentrant = checkpoint(block, x, use_reentrant=True)
    assert not implicit.requires_grad and not reentrant.requires_grad

    non_reentrant = checkpoint(block, x, use_reentrant=False)
    assert non_reentrant.requires_grad
    non_reentrant.sum().backward()
    assert block.weight.grad is not None


def test_rule_applies_from_torch_2_1() -> None:
    source = "from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x)\n"
    assert check(source, "x.py", Config(select=("TD709",), target_torch=(2, 0))) == []
    assert check(source, "x.py", Config(select=("TD709",), target_torch=(2, 1)))
