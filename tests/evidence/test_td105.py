"""TD105: a misspelt requires_grad raises as a keyword and silently does nothing as an attribute."""

import pytest
import torch
from torch import nn


def test_misspelt_keyword_of_a_factory_raises_type_error() -> None:
    message = r"^zeros\(\) got an unexpected keyword argument 'require_grad'$"
    with pytest.raises(TypeError, match=message):
        torch.zeros(10, 3, require_grad=True)


def test_misspelt_keyword_of_parameter_raises_type_error() -> None:
    with pytest.raises(TypeError, match="got an unexpected keyword argument 'require_grad'"):
        nn.Parameter(torch.empty(3), require_grad=False)


def test_misspelt_attribute_on_a_tensor_leaves_it_untracked() -> None:
    x = torch.ones(3)
    x.require_grad = True  # a new Python attribute; no error

    y = (x * 2).sum()

    assert x.requires_grad is False
    assert y.grad_fn is None
    message = "^element 0 of tensors does not require grad and does not have a grad_fn$"
    with pytest.raises(RuntimeError, match=message):
        y.backward()


def test_misspelt_attribute_does_not_freeze_a_parameter() -> None:
    model = nn.Linear(4, 2)
    for param in model.parameters():
        param.require_grad = False

    model(torch.randn(5, 4)).sum().backward()

    assert all(p.requires_grad for p in model.parameters())
    assert model.weight.grad is not None  # still trained


def test_correct_spelling_freezes() -> None:
    model = nn.Linear(4, 2)
    model.weight.requires_grad = False
    model(torch.randn(5, 4)).sum().backward()
    assert model.weight.grad is None
