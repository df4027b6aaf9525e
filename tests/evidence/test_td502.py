"""TD502: DistributedSampler shuffles with `seed + epoch`; without set_epoch() every epoch
visits the samples in the same order."""

from torch.utils.data import DataLoader, DistributedSampler

DATASET = list(range(16))


def _epoch_order(loader: DataLoader) -> list[int]:
    return [int(i) for batch in loader for i in batch]


def test_same_order_every_epoch_without_set_epoch() -> None:
    # num_replicas/rank given explicitly: no process group needed
    sampler = DistributedSampler(DATASET, num_replicas=2, rank=0)
    loader = DataLoader(DATASET, batch_size=4, sampler=sampler)
    epochs = [_epoch_order(loader) for _ in range(3)]
    assert epochs[0] == epochs[1] == epochs[2]
    assert epochs[0] != sorted(epochs[0])  # shuffled, just never reshuffled


def test_set_epoch_reshuffles() -> None:
    sampler = DistributedSampler(DATASET, num_replicas=2, rank=0)
    loader = DataLoader(DATASET, batch_size=4, sampler=sampler)
    orders = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        orders.append(_epoch_order(loader))
    assert orders[0] != orders[1] and orders[1] != orders[2]
    other = DistributedSampler(DATASET, num_replicas=2, rank=1)
    other.set_epoch(2)
    assert sorted(orders[2] + list(other)) == DATASET  # the ranks still split one permutation


def test_shuffle_false_ignores_the_epoch() -> None:
    sampler = DistributedSampler(DATASET, num_replicas=2, rank=0, shuffle=False)
    first = list(sampler)
    sampler.set_epoch(5)
    assert list(sampler) == first == list(range(0, 16, 2))
