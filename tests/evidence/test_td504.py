"""TD504: with num_workers unset (0), every sample is loaded in the main process."""

import inspect
import multiprocessing
import os

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info


class WhereLoaded(Dataset):
    """Each sample says which process loaded it and whether it ran in a worker."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        info = get_worker_info()
        return torch.tensor([os.getpid(), -1 if info is None else info.id])


def test_default_is_zero_workers() -> None:
    assert inspect.signature(DataLoader.__init__).parameters["num_workers"].default == 0


def test_zero_workers_loads_in_the_main_process() -> None:
    rows = torch.cat(list(DataLoader(WhereLoaded(), batch_size=4)))
    assert set(rows[:, 0].tolist()) == {os.getpid()}
    assert set(rows[:, 1].tolist()) == {-1}


@pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="needs the fork start method"
)
def test_workers_load_in_other_processes() -> None:
    loader = DataLoader(WhereLoaded(), batch_size=4, num_workers=2, multiprocessing_context="fork")
    rows = torch.cat(list(loader))
    assert os.getpid() not in set(rows[:, 0].tolist())
    assert set(rows[:, 1].tolist()) == {0, 1}


class OnTheGpu(Dataset):
    """Puts each item on the GPU inside `__getitem__`, as some training scripts do."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor([index]).cuda()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="needs the fork start method"
)
def test_forked_workers_cannot_put_items_on_the_gpu() -> None:
    # TD504 stays quiet on such datasets: once the training process has used CUDA, a forked
    # worker cannot, so `num_workers` is no remedy until the move goes into the training loop
    torch.zeros(1, device="cuda")
    loader = DataLoader(OnTheGpu(), batch_size=2, num_workers=1, multiprocessing_context="fork")
    with pytest.raises(RuntimeError, match="Cannot re-initialize CUDA in forked subprocess"):
        list(loader)
