"""TD102: zero_grad() between backward() and step() leaves the parameters unchanged."""

import torch
from torch import nn


def _step_with_zero_grad_in_between(optimizer_class) -> tuple[list, list]:
    model = nn.Linear(4, 2)
    optimizer = optimizer_class(model.parameters(), lr=0.1)
    before = [p.detach().clone() for p in model.parameters()]
    loss = nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 2))
    loss.backward()
    optimizer.zero_grad()
    assert all(p.grad is None for p in model.parameters())  # set_to_none is the default
    optimizer.step()
    return before, [p.detach() for p in model.parameters()]


def test_sgd_step_after_zero_grad_changes_nothing() -> None:
    before, after = _step_with_zero_grad_in_between(torch.optim.SGD)
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))


def test_adam_step_after_zero_grad_changes_nothing() -> None:
    before, after = _step_with_zero_grad_in_between(torch.optim.Adam)
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))


def test_the_fixed_order_does_update() -> None:
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = model.weight.detach().clone()
    optimizer.zero_grad()
    nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 2)).backward()
    optimizer.step()
    assert not torch.equal(before, model.weight)
