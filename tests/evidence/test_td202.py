"""TD202: numpy's float64 arrays become float64 tensors, and a float32 layer refuses them."""

import io

import numpy as np
import pytest
import torch
from torch import nn

LINEAR_ERROR = "mat1 and mat2 must have the same dtype, but got Double and Float"
CONV_ERROR = "Input type (double) and bias type (float) should be the same"


@pytest.mark.parametrize(
    "array",
    [
        np.random.rand(4, 10),
        np.random.randn(4, 10),
        np.zeros((4, 10)),
        np.ones((4, 10)),
        np.linspace(0.0, 1.0, 40).reshape(4, 10),
        np.array([[0.5] * 10] * 4),
        np.full((4, 10), 0.5),
        np.random.default_rng(0).standard_normal((4, 10)),
        np.zeros((4, 10)) * 2.0,
        np.loadtxt(io.StringIO("1 2 3\n4 5 6")),
    ],
)
@pytest.mark.parametrize("convert", [torch.from_numpy, torch.tensor, torch.as_tensor])
def test_numpy_float_arrays_become_float64_tensors(array, convert) -> None:
    assert convert(array).dtype == torch.float64


def test_float64_input_to_a_float32_linear_raises() -> None:
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
    with pytest.raises(RuntimeError) as raised:
        model(torch.from_numpy(np.random.rand(4, 10)))
    assert str(raised.value) == LINEAR_ERROR


def test_double_input_to_a_float32_linear_raises() -> None:
    with pytest.raises(RuntimeError) as raised:
        nn.Linear(10, 1)(torch.randn(4, 10).double())
    assert str(raised.value) == LINEAR_ERROR


def test_float64_input_to_a_float32_conv_raises() -> None:
    with pytest.raises(RuntimeError) as raised:
        nn.Conv2d(3, 4, 3)(torch.from_numpy(np.random.rand(1, 3, 8, 8)))
    assert str(raised.value) == CONV_ERROR


@pytest.mark.parametrize(
    "tensor",
    [
        torch.from_numpy(np.random.rand(4, 10)).float(),
        torch.tensor(np.random.rand(4, 10), dtype=torch.float32),
        torch.from_numpy(np.random.rand(4, 10).astype(np.float32)),
    ],
)
def test_the_fixes_give_float32(tensor) -> None:
    assert tensor.dtype == torch.float32
    assert nn.Linear(10, 1)(tensor).dtype == torch.float32


def test_uint8_divided_by_a_python_float_stays_float32() -> None:
    images = torch.from_numpy(np.random.randint(0, 255, (2, 10), dtype=np.uint8))
    assert (images / 255.0).dtype == torch.float32
    assert (images / torch.tensor(255.0, dtype=torch.float64)).dtype == torch.float64


def test_python_floats_and_integer_arrays_are_not_float64() -> None:
    assert torch.tensor([[0.5] * 10]).dtype == torch.float32
    assert torch.from_numpy(np.array([1, 2, 3])).dtype == torch.int64


def test_a_float64_model_accepts_float64() -> None:
    out = nn.Linear(10, 1).double()(torch.from_numpy(np.random.rand(2, 10)))
    assert out.dtype == torch.float64
