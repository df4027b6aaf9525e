"""TD206: each `.to(device)` of a CPU tensor makes a new copy on the device; moving it once
before the loop makes one. (`.to()` of a tensor already there returns it unchanged.)"""

import pytest
import torch


def test_each_move_of_a_cpu_tensor_is_a_new_copy() -> None:
    weights = torch.tensor([1.0, 2.0, 5.0])
    copies = [weights.to("meta") for _ in range(3)]
    assert len({id(c) for c in copies}) == 3
    assert all(c is not weights for c in copies)


def test_moving_a_tensor_already_on_the_device_returns_it() -> None:
    moved = torch.tensor([1.0, 2.0]).to("meta")
    assert moved.to("meta") is moved


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_each_move_to_cuda_allocates_device_memory() -> None:
    weights = torch.tensor([1.0, 2.0, 5.0])
    first, second = weights.to("cuda"), weights.to("cuda")
    assert first.data_ptr() != second.data_ptr()
