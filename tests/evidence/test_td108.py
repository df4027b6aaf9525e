"""TD108: scheduler.step() before optimizer.step() warns and skips the first learning rate."""

import re
import warnings

import pytest
import torch
from torch import nn

WARNING = (
    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and "
    "later, you should call them in the opposite order: `optimizer.step()` before "
    "`lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first value "
    "of the learning rate schedule."
)


def _first_update(scheduler_first: bool) -> float:
    model = nn.Linear(1, 1, bias=False)
    nn.init.constant_(model.weight, 0.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.1)
    model(torch.ones(1, 1)).sum().backward()  # gradient 1.0
    if scheduler_first:
        scheduler.step()
        optimizer.step()
    else:
        optimizer.step()
        scheduler.step()
    return -model.weight.item()  # lr * grad of the first update


def test_scheduler_first_warns() -> None:
    with pytest.warns(UserWarning, match=re.escape(WARNING)):
        _first_update(scheduler_first=True)


def test_scheduler_first_skips_the_first_learning_rate() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _first_update(scheduler_first=True) == pytest.approx(0.1)  # lr 1.0 never used


def test_optimizer_first_uses_the_initial_learning_rate_without_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _first_update(scheduler_first=False) == pytest.approx(1.0)


def test_reduce_lr_on_plateau_does_not_warn() -> None:
    model = nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scheduler.step(1.0)
        optimizer.step()
