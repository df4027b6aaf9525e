"""TD106: writes through .data skip autograd's version check; the same write under no_grad is
caught."""

import pytest
import torch
from torch import nn

INPLACE_ERROR = (
    "one of the variables needed for gradient computation has been modified by an inplace "
    "operation"
)


def test_write_through_data_gives_a_silently_wrong_gradient() -> None:
    w = torch.ones(3, requires_grad=True)
    loss = (w * w).sum()  # d loss / dw = 2 * w = 2 at the values used in the forward pass

    w.data.mul_(2)  # the graph saved w; the change is hidden from autograd
    loss.backward()

    assert torch.equal(w.grad, torch.full((3,), 4.0))  # computed from the new values, no error


def test_the_same_write_under_no_grad_raises() -> None:
    w = torch.ones(3, requires_grad=True)
    loss = (w * w).sum()

    with torch.no_grad():
        w.mul_(2)

    with pytest.raises(RuntimeError, match=INPLACE_ERROR):
        loss.backward()


def test_no_grad_update_after_backward_matches_the_data_update() -> None:
    torch.manual_seed(0)
    a, b = nn.Linear(4, 2), nn.Linear(4, 2)
    b.load_state_dict(a.state_dict())
    x = torch.randn(8, 4)
    a(x).pow(2).mean().backward()
    b(x).pow(2).mean().backward()

    for p in a.parameters():
        p.data -= 0.1 * p.grad
    for p in b.parameters():
        with torch.no_grad():
            p -= 0.1 * p.grad

    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
        assert pb.is_leaf and pb.requires_grad and isinstance(pb, nn.Parameter)


def test_a_write_through_a_detached_alias_is_also_caught() -> None:
    w = torch.ones(3, requires_grad=True)
    loss = (w * w).sum()

    w.detach().mul_(2)  # shares the version counter, unlike .data

    with pytest.raises(RuntimeError, match=INPLACE_ERROR):
        loss.backward()
