"""TD715: without a seed, every run starts from different weights; with one, runs repeat."""

from __future__ import annotations

import torch


def initial_weights(seed: int | None) -> torch.Tensor:
    if seed is not None:
        torch.manual_seed(seed)
    else:
        torch.seed()  # what a fresh process does: a non-deterministic seed
    return torch.nn.Linear(4, 4).weight.detach().clone()


def test_unseeded_runs_differ() -> None:
    assert not torch.equal(initial_weights(None), initial_weights(None))


def test_seeded_runs_repeat() -> None:
    assert torch.equal(initial_weights(0), initial_weights(0))
