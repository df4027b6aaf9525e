"""TD304: a tensor stored as a plain attribute is left behind by .to() and not saved."""

import pytest
import torch
from torch import nn


class PlainTensor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mean = torch.zeros(3)


class WithBuffer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(3))


def test_plain_tensor_is_not_moved_or_converted() -> None:
    module = PlainTensor().to("meta")  # the same path .to("cuda") takes
    assert module.mean.device.type == "cpu"
    module = PlainTensor().to(torch.float64)
    assert module.mean.dtype == torch.float32


def test_plain_tensor_is_not_in_state_dict() -> None:
    assert "mean" not in PlainTensor().state_dict()


def test_buffer_is_moved_and_saved() -> None:
    module = WithBuffer().to("meta")
    assert module.mean.device.type == "meta"
    assert WithBuffer().to(torch.float64).mean.dtype == torch.float64
    assert "mean" in WithBuffer().state_dict()


def test_tensor_requiring_grad_is_not_a_parameter() -> None:
    class Temperature(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.log_t = torch.zeros(1, requires_grad=True)

    assert list(Temperature().parameters()) == []


def test_left_behind_tensor_meets_moved_inputs() -> None:
    """After .to(device) the inputs live on the new device and the attribute does not."""
    module = PlainTensor().to("meta")
    with pytest.raises(
        RuntimeError, match=r"^Tensor on device cpu is not on the expected device meta!$"
    ):
        torch.ones(3, device="meta") - module.mean


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_left_behind_tensor_on_cuda() -> None:
    module = PlainTensor().to("cuda")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(3, device="cuda") - module.mean


def test_zero_dim_cpu_tensor_mixes_with_any_device() -> None:
    """Why `torch.tensor(1.0)` stays quiet."""
    assert (torch.ones(3, device="meta") * torch.tensor(2.0)).device.type == "meta"


class GridCopier(nn.Module):
    """Stays quiet under TD304: forward only sizes the grid and copies it into its own tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.grid = torch.arange(6.0).view(2, 3)

    def forward(self, theta: torch.Tensor) -> torch.Tensor:
        batch = torch.zeros((theta.size(0), *self.grid.size()), device=theta.device)
        for i in range(theta.size(0)):
            batch[i] = self.grid  # a copy from the CPU into the input's device
        return batch * theta.view(-1, 1, 1)


def test_copying_a_left_behind_tensor_into_a_moved_one_works() -> None:
    module = GridCopier().to("meta")  # the grid stays on the CPU
    assert module.grid.device.type == "cpu"
    out = module(torch.ones(4, device="meta"))
    assert out.device.type == "meta" and out.shape == (4, 2, 3)


def test_a_zero_dim_tensor_of_a_float_argument_mixes_with_any_device() -> None:
    drop_rate = torch.tensor(0.25)  # `torch.tensor(drop_rate)` with `drop_rate: float`
    assert drop_rate.dim() == 0
    assert (torch.ones(3, device="meta") * (1 - drop_rate)).device.type == "meta"
    with pytest.raises(RuntimeError, match="is not on the expected device meta"):
        torch.ones(3, device="meta") * torch.tensor([0.25])  # one element, not 0-dim


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_copying_a_left_behind_tensor_into_a_cuda_one_works() -> None:
    module = GridCopier().to("cuda")
    assert module(torch.ones(4, device="cuda")).device.type == "cuda"
