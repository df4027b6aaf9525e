"""TD604: a DataLoader knows nothing about ranks; without a DistributedSampler every rank of a
DDP job iterates over the whole dataset, in the same order when the ranks share a seed."""

import torch
from torch.utils.data import DataLoader, DistributedSampler

DATASET = list(range(16))


def _rank_batches(rank: int, sampler_for_rank: bool) -> list[int]:
    torch.manual_seed(0)  # the usual per-script seed: the same on every rank
    if sampler_for_rank:
        sampler = DistributedSampler(DATASET, num_replicas=2, rank=rank, shuffle=True)
        loader = DataLoader(DATASET, batch_size=4, sampler=sampler)
    else:
        loader = DataLoader(DATASET, batch_size=4, shuffle=True)
    return [int(i) for batch in loader for i in batch]


def test_without_distributed_sampler_every_rank_sees_the_same_data() -> None:
    rank0, rank1 = _rank_batches(0, False), _rank_batches(1, False)
    assert rank0 == rank1
    assert sorted(rank0) == DATASET


def test_distributed_sampler_splits_the_data() -> None:
    rank0, rank1 = _rank_batches(0, True), _rank_batches(1, True)
    assert len(rank0) == len(rank1) == 8
    assert not set(rank0) & set(rank1)
    assert sorted(rank0 + rank1) == DATASET


def _loader_order(shuffle: bool) -> list[int]:
    loader = DataLoader(DATASET, batch_size=4, shuffle=shuffle)
    return [int(i) for batch in loader for i in batch]


def test_without_shuffle_every_rank_gets_the_same_batches_even_unseeded() -> None:
    # the message's claim for a loader that does not shuffle: no seed needed
    torch.seed()  # a fresh random seed, as each rank of an unseeded script has
    rank0 = _loader_order(shuffle=False)
    torch.seed()
    rank1 = _loader_order(shuffle=False)
    assert rank0 == rank1 == DATASET


def test_shuffled_ranks_each_go_through_the_whole_dataset() -> None:
    # the claim for a shuffling loader: every rank sees every sample each epoch, whatever the
    # seed, so an epoch does the work once per rank
    for seed in (1, 2):
        torch.manual_seed(seed)
        assert sorted(_loader_order(shuffle=True)) == DATASET
