"""TD207: `torch.tensor(t)` of a tensor warns, copies, and drops the autograd history."""

import warnings

import pytest
import torch

WARNING = (
    "To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
    "sourceTensor.detach().clone().requires_grad_(True), rather than torch.tensor(sourceTensor)."
)


def test_tensor_of_a_tensor_warns() -> None:
    source = torch.ones(3)
    with pytest.warns(UserWarning) as caught:
        torch.tensor(source)
    assert [str(w.message) for w in caught] == [WARNING]


def test_tensor_of_a_tensor_drops_autograd_and_copies() -> None:
    source = torch.ones(3, requires_grad=True) * 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        copy = torch.tensor(source)
    assert copy.requires_grad is False and copy.grad_fn is None
    assert copy.data_ptr() != source.data_ptr()
    assert torch.equal(copy, source.detach())


def test_detach_clone_is_the_same_copy_without_a_warning() -> None:
    source = torch.ones(3, requires_grad=True) * 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        copy = source.detach().clone()
        with_grad = source.detach().clone().requires_grad_(True)
        converted = source.detach().clone().to(dtype=torch.float64)
    assert copy.grad_fn is None and copy.data_ptr() != source.data_ptr()
    assert torch.equal(copy, source.detach())
    assert with_grad.requires_grad and with_grad.is_leaf
    assert converted.dtype == torch.float64


def test_tensor_of_lists_and_numpy_does_not_warn() -> None:
    import numpy as np

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.tensor([1.0, 2.0])
        torch.tensor(np.arange(3))
