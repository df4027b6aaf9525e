"""TD305: cross_entropy applies log_softmax itself; feeding it probabilities squashes twice."""

import math

import pytest
import torch
import torch.nn.functional as F


def test_gradients_shrink_with_softmax_in_front() -> None:
    logits = torch.randn(16, 10) * 5
    target = torch.randint(0, 10, (16,))

    raw = logits.clone().requires_grad_()
    F.cross_entropy(raw, target).backward()
    squashed = logits.clone().requires_grad_()
    F.cross_entropy(F.softmax(squashed, dim=1), target).backward()

    # the numbers the doc page quotes (seed 0, see conftest.py)
    assert raw.grad.norm().item() == pytest.approx(0.324, abs=5e-4)
    assert squashed.grad.norm().item() == pytest.approx(0.0099, abs=5e-5)
    assert squashed.grad.norm() < raw.grad.norm() / 30


def test_loss_can_never_reach_zero() -> None:
    """A perfect, confident prediction still costs log(1 + (C-1)/e) with the extra softmax."""
    classes = 10
    perfect = torch.full((1, classes), -100.0)
    perfect[0, 3] = 100.0
    target = torch.tensor([3])

    assert F.cross_entropy(perfect, target).item() < 1e-6
    floor = F.cross_entropy(F.softmax(perfect, dim=1), target).item()
    assert math.isclose(floor, math.log(1 + (classes - 1) / math.e), rel_tol=1e-6)  # 1.4612


def test_nll_on_probabilities_is_a_different_objective() -> None:
    """nll_loss expects log-probabilities; on probabilities it is -mean(p[target])."""
    logits = torch.randn(8, 5)
    target = torch.randint(0, 5, (8,))
    probs = F.softmax(logits, dim=1)
    on_probs = F.nll_loss(probs, target)
    assert torch.allclose(on_probs, -probs[torch.arange(8), target].mean())
    assert on_probs.item() < 0  # negative "loss"
    expected = F.cross_entropy(logits, target)
    assert torch.allclose(F.nll_loss(F.log_softmax(logits, dim=1), target), expected)


def test_log_softmax_in_front_of_cross_entropy_changes_nothing() -> None:
    """log_softmax is idempotent, so cross_entropy(log_softmax(z)) == cross_entropy(z): quiet."""
    logits = torch.randn(8, 5)
    target = torch.randint(0, 5, (8,))
    expected = F.cross_entropy(logits, target)
    assert torch.allclose(F.cross_entropy(F.log_softmax(logits, dim=1), target), expected)
