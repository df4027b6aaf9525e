"""TD110: zero_grad(set_to_none=False) keeps zero-filled gradients; the default frees them."""

import torch
from torch import nn


def test_default_zero_grad_sets_gradients_to_none() -> None:
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(3, 4)).sum().backward()

    optimizer.zero_grad()

    assert all(p.grad is None for p in model.parameters())


def test_set_to_none_false_keeps_the_same_zero_filled_tensors() -> None:
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(3, 4)).sum().backward()
    storage = model.weight.grad.data_ptr()

    optimizer.zero_grad(set_to_none=False)

    assert torch.count_nonzero(model.weight.grad) == 0
    assert model.weight.grad.data_ptr() == storage  # the memory stays allocated


def test_zeros_and_none_differ_for_parameters_without_a_gradient() -> None:
    # A parameter left out of the next forward pass: with zeros, SGD's weight decay still
    # moves it; with None it is skipped. Dropping the argument can change results.
    results = []
    for set_to_none in (False, True):
        torch.manual_seed(0)
        used, unused = nn.Linear(2, 1), nn.Linear(2, 1)
        params = [*used.parameters(), *unused.parameters()]
        optimizer = torch.optim.SGD(params, lr=0.1, weight_decay=0.5)
        (used(torch.ones(1, 2)) + unused(torch.ones(1, 2))).sum().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=set_to_none)
        before = unused.weight.detach().clone()
        used(torch.ones(1, 2)).sum().backward()
        optimizer.step()
        results.append(torch.equal(unused.weight, before))
    assert results == [False, True]
