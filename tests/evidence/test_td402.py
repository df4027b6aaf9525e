"""TD402: in training mode dropout is random and batch norm uses (and updates) batch stats."""

import torch
from torch import nn


def test_dropout_is_random_in_training_mode() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
    x = torch.randn(4, 8)
    with torch.no_grad():
        assert not torch.equal(model(x), model(x))
        model.eval()
        assert torch.equal(model(x), model(x))


def test_batch_norm_updates_running_stats_in_training_mode_even_under_no_grad() -> None:
    bn = nn.BatchNorm1d(4)
    before = bn.running_mean.clone()
    with torch.no_grad():
        bn(torch.randn(16, 4) + 3)
    assert not torch.equal(bn.running_mean, before)

    bn.eval()
    frozen = bn.running_mean.clone()
    with torch.no_grad():
        bn(torch.randn(16, 4) + 3)
    assert torch.equal(bn.running_mean, frozen)


def test_batch_norm_output_depends_on_the_batch_in_training_mode() -> None:
    bn = nn.BatchNorm1d(2)
    sample = torch.tensor([[1.0, 2.0]])
    with torch.no_grad():
        alone = bn(torch.cat([sample, torch.tensor([[0.0, 0.0]])]))[0]
        other = bn(torch.cat([sample, torch.tensor([[5.0, 5.0]])]))[0]
    assert not torch.allclose(alone, other)
    bn.eval()
    with torch.no_grad():
        a = bn(torch.cat([sample, torch.tensor([[0.0, 0.0]])]))[0]
        b = bn(torch.cat([sample, torch.tensor([[5.0, 5.0]])]))[0]
    assert torch.allclose(a, b)
