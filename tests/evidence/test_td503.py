"""TD503: persistent_workers / prefetch_factor without worker processes raise ValueError."""

import pytest
from torch.utils.data import DataLoader

DATASET = list(range(8))
PREFETCH_MESSAGE = (
    "prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 to "
    "enable multiprocessing, otherwise set prefetch_factor to None."
)


@pytest.mark.parametrize("workers", [{}, {"num_workers": 0}], ids=["unset", "zero"])
def test_persistent_workers_without_workers_raises(workers: dict) -> None:
    with pytest.raises(ValueError) as raised:
        DataLoader(DATASET, persistent_workers=True, **workers)
    assert str(raised.value) == "persistent_workers option needs num_workers > 0"


@pytest.mark.parametrize("workers", [{}, {"num_workers": 0}], ids=["unset", "zero"])
def test_prefetch_factor_without_workers_raises(workers: dict) -> None:
    with pytest.raises(ValueError) as raised:
        DataLoader(DATASET, prefetch_factor=2, **workers)
    assert str(raised.value) == PREFETCH_MESSAGE


def test_the_harmless_spellings() -> None:
    DataLoader(DATASET, num_workers=0, prefetch_factor=None, persistent_workers=False)
    DataLoader(DATASET, num_workers=2, prefetch_factor=4, persistent_workers=True)
