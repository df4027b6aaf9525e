"""TD506: batch_sampler= with batch_size, shuffle, sampler or drop_last raises ValueError."""

import pytest
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler

DATASET = list(range(10))
MESSAGE = (
    "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
)


def _batch_sampler() -> BatchSampler:
    return BatchSampler(SequentialSampler(DATASET), batch_size=4, drop_last=False)


@pytest.mark.parametrize(
    "conflict",
    [
        {"batch_size": 4},
        {"batch_size": None},
        {"shuffle": True},
        {"sampler": RandomSampler(DATASET)},
        {"drop_last": True},
    ],
    ids=["batch_size", "batch_size_none", "shuffle", "sampler", "drop_last"],
)
def test_conflicting_argument_raises(conflict: dict) -> None:
    with pytest.raises(ValueError) as raised:
        DataLoader(DATASET, batch_sampler=_batch_sampler(), **conflict)
    assert str(raised.value) == MESSAGE


def test_default_values_do_not_conflict() -> None:
    loader = DataLoader(DATASET, batch_size=1, shuffle=False, sampler=None, drop_last=False,
                        batch_sampler=_batch_sampler())
    assert [batch.tolist() for batch in loader] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_the_batch_sampler_decides_the_batches() -> None:
    sampler = BatchSampler(RandomSampler(DATASET), batch_size=3, drop_last=True)
    batches = [batch.tolist() for batch in DataLoader(DATASET, batch_sampler=sampler)]
    assert [len(batch) for batch in batches] == [3, 3, 3]
