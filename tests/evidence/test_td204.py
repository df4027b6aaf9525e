"""TD204: a tensor made without `device=` inside forward() is on the CPU and cannot be mixed with
inputs on another device. On a machine without a GPU the meta device stands in for it."""

import pytest
import torch
from torch import nn


class Noisy(nn.Module):
    def forward(self, x):
        return x + torch.randn(x.shape) * 0.1


class NoisyOnInputDevice(nn.Module):
    def forward(self, x):
        return x + torch.randn(x.shape, device=x.device) * 0.1


def test_factory_without_device_is_on_the_cpu() -> None:
    assert torch.zeros(3).device.type == "cpu"
    assert torch.arange(3).device.type == "cpu"


def test_mixing_with_an_input_on_another_device_raises() -> None:
    x = torch.randn(2, 3, device="meta")
    with pytest.raises(
        RuntimeError, match="Tensor on device cpu is not on the expected device meta!"
    ):
        Noisy()(x)


def test_creating_on_the_input_device_works() -> None:
    x = torch.randn(2, 3, device="meta")
    assert NoisyOnInputDevice()(x).device.type == "meta"


def test_a_zero_dim_cpu_tensor_mixes_with_any_device() -> None:
    x = torch.randn(2, 3, device="meta")
    assert (x * torch.tensor(2.0)).device.type == "meta"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_mixing_with_a_cuda_input_raises() -> None:
    x = torch.randn(2, 3, device="cuda")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        Noisy()(x)
