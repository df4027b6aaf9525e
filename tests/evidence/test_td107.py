"""TD107: step() before backward() applies the gradients left in .grad, not this batch's."""

import torch
from torch import nn


def _setup() -> tuple[nn.Linear, torch.optim.SGD, list[tuple[torch.Tensor, torch.Tensor]]]:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(2)]
    return model, optimizer, batches


def test_after_zero_grad_the_first_step_changes_nothing() -> None:
    model, optimizer, batches = _setup()
    before = model.weight.detach().clone()
    x, y = batches[0]

    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.step()  # .grad is None: nothing to apply
    loss.backward()

    assert torch.equal(model.weight, before)


def test_without_zero_grad_the_step_applies_the_previous_batch() -> None:
    model, optimizer, batches = _setup()
    (x0, y0), (x1, y1) = batches
    reference = nn.Linear(4, 1)
    reference.load_state_dict(model.state_dict())
    nn.functional.mse_loss(reference(x0), y0).backward()
    previous_batch_grad = reference.weight.grad.clone()

    # iteration 1: step (nothing), backward of batch 0
    loss = nn.functional.mse_loss(model(x0), y0)
    optimizer.step()
    loss.backward()
    start = model.weight.detach().clone()
    # iteration 2: the step applies batch 0's gradient, not batch 1's
    loss = nn.functional.mse_loss(model(x1), y1)
    optimizer.step()

    assert torch.allclose(model.weight, start - 0.1 * previous_batch_grad)
