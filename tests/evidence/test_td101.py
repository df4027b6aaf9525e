"""TD101: backward() adds to .grad; without zeroing, step() applies the sum of all batches."""

import torch
from torch import nn


def test_gradients_accumulate_across_iterations_without_zero_grad() -> None:
    model = nn.Linear(4, 1)
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    criterion = nn.MSELoss()

    criterion(model(x), y).backward()
    single = model.weight.grad.clone()
    criterion(model(x), y).backward()  # the same batch again, no zero_grad in between

    assert torch.allclose(model.weight.grad, 2 * single)


def test_zero_grad_before_backward_gives_this_batch_only() -> None:
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    criterion = nn.MSELoss()
    criterion(model(x), y).backward()
    single = model.weight.grad.clone()

    optimizer.zero_grad()
    criterion(model(x), y).backward()

    assert torch.allclose(model.weight.grad, single)
