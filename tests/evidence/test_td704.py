"""TD704: `Variable` is a leftover: it returns a plain tensor, detached from the graph."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import Variable


def test_variable_returns_a_tensor() -> None:
    t = torch.ones(2)
    v = Variable(t)
    assert type(v) is torch.Tensor
    assert v.data_ptr() == t.data_ptr()  # same storage, like t.detach()
    assert not v.requires_grad


def test_variable_detaches_a_tensor_with_history() -> None:
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    v = Variable(y)
    assert y.grad_fn is not None
    assert v.grad_fn is None and not v.requires_grad


def test_requires_grad_true_is_a_new_leaf() -> None:
    y = torch.ones(2, requires_grad=True) * 3
    v = Variable(y, requires_grad=True)
    w = y.detach().requires_grad_()
    assert v.is_leaf and w.is_leaf
    assert v.requires_grad and w.requires_grad
    assert torch.equal(v, w)


def test_volatile_has_no_effect() -> None:
    with pytest.warns(
        UserWarning,
        match=r"volatile was removed and now has no effect. Use `with torch.no_grad\(\):` instead.",
    ):
        v = Variable(torch.ones(2), volatile=True)
    w = torch.nn.Linear(2, 1)
    assert w(v).requires_grad  # gradients are still recorded: nothing is "volatile"
