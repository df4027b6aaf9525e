"""TD306: BCEWithLogitsLoss applies sigmoid itself; BCELoss needs probabilities."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn


def test_double_sigmoid_squeezes_predictions() -> None:
    logits = torch.linspace(-100, 100, 101)
    twice = torch.sigmoid(torch.sigmoid(logits))
    assert twice.min().item() == pytest.approx(0.5)
    assert twice.max().item() == pytest.approx(1 / (1 + math.exp(-1)))  # 0.7311


def test_negative_examples_never_cost_less_than_log_2() -> None:
    very_negative = torch.tensor([-100.0])
    loss = nn.BCEWithLogitsLoss()(torch.sigmoid(very_negative), torch.tensor([0.0]))
    assert loss.item() == pytest.approx(math.log(2))
    assert nn.BCEWithLogitsLoss()(very_negative, torch.tensor([0.0])).item() < 1e-6


def test_bce_loss_on_logits_raises() -> None:
    logits = torch.tensor([2.0, -1.0])
    with pytest.raises(RuntimeError, match=r"^all elements of input should be between 0 and 1$"):
        nn.BCELoss()(logits, torch.tensor([1.0, 0.0]))
    with pytest.raises(RuntimeError, match=r"^all elements of input should be between 0 and 1$"):
        F.binary_cross_entropy(logits, torch.tensor([1.0, 0.0]))


def test_with_logits_equals_bce_on_sigmoid() -> None:
    logits = torch.randn(6)
    target = torch.randint(0, 2, (6,)).float()
    assert torch.allclose(
        F.binary_cross_entropy_with_logits(logits, target),
        F.binary_cross_entropy(torch.sigmoid(logits), target),
        atol=1e-6,
    )
