"""TD403: eval() sticks until train() is called; backward() and step() do not switch back."""

import torch
import torch.nn.functional as F
from torch import nn


def test_training_after_eval_runs_in_eval_mode() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))

    model.eval()  # end of epoch 1: validation
    stats = model[1].running_mean.clone()

    # epoch 2: the training step, with no model.train()
    optimizer.zero_grad()
    out = model(x)
    F.cross_entropy(out, y).backward()
    optimizer.step()

    assert model.training is False
    assert all(not m.training for m in model.modules())
    assert torch.equal(model[1].running_mean, stats)  # batch norm no longer learns statistics
    with torch.no_grad():
        assert torch.equal(model(x), model(x))  # dropout is off


def test_train_switches_back() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5))
    model.eval()
    model.train()
    assert all(m.training for m in model.modules())
    x = torch.randn(16, 4)
    with torch.no_grad():
        assert not torch.equal(model(x), model(x))
