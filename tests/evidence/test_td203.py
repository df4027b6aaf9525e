"""TD203: `Tensor.to()`/`.float()` return a new tensor and leave the original as it was;
`Module.to()` moves the module in place."""

import torch
from torch import nn


def test_tensor_to_is_not_in_place() -> None:
    x = torch.zeros(2, 3)
    x.to("meta")  # result dropped
    x.to(torch.float64)
    assert x.device.type == "cpu"
    assert x.dtype == torch.float32


def test_tensor_float_is_not_in_place() -> None:
    x = torch.zeros(3, dtype=torch.int64)
    x.float()
    assert x.dtype == torch.int64


def test_assigning_the_result_moves_it() -> None:
    x = torch.zeros(2, 3)
    x = x.to("meta")
    assert x.device.type == "meta"


def test_module_to_moves_the_module_in_place() -> None:
    model = nn.Linear(3, 2)
    model.to("meta")
    assert model.weight.device.type == "meta"
    model = nn.Linear(3, 2)
    model.double()
    assert model.weight.dtype == torch.float64


def test_to_the_current_device_returns_the_same_tensor() -> None:
    x = torch.zeros(2)
    assert x.to("cpu") is x  # which is why a dropped `.to()` goes unnoticed on the CPU
