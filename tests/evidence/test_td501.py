"""TD501: a DataLoader given both shuffle=True and a sampler raises at construction."""

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

DATASET = list(range(10))


def test_shuffle_true_with_sampler_raises() -> None:
    with pytest.raises(ValueError) as raised:
        DataLoader(DATASET, batch_size=2, shuffle=True, sampler=RandomSampler(DATASET))
    assert str(raised.value) == "sampler option is mutually exclusive with shuffle"


def test_distributed_sampler_with_shuffle_true_raises_too() -> None:
    sampler = DistributedSampler(DATASET, num_replicas=2, rank=0)
    with pytest.raises(ValueError, match="^sampler option is mutually exclusive with shuffle$"):
        DataLoader(DATASET, batch_size=2, shuffle=True, sampler=sampler)


def test_without_shuffle_the_sampler_decides_the_order() -> None:
    torch.manual_seed(0)
    sampler = RandomSampler(DATASET)
    loader = DataLoader(DATASET, batch_size=10, sampler=sampler)
    (batch,) = list(loader)
    assert sorted(batch.tolist()) == DATASET
    assert batch.tolist() != DATASET  # the sampler shuffled


def test_shuffle_only_when_there_is_no_sampler() -> None:
    for sampler in (None, RandomSampler(DATASET)):
        DataLoader(DATASET, shuffle=(sampler is None), sampler=sampler)
