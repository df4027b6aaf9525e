"""TD711: transforms.v2.ToTensor warns; ToImage + ToDtype(float32, scale=True) gives the same
values. The v1 transforms.ToTensor does not warn."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from .test_td701 import import_torchvision


def test_v2_to_tensor_warns_and_the_pair_gives_the_same_values() -> None:
    import_torchvision()
    pil = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
    from torchvision.transforms import v2

    with pytest.warns(UserWarning) as caught:
        old = v2.ToTensor()
    assert str(caught[0].message) == (
        "The transform `ToTensor()` is deprecated and will be removed in a future release. "
        "Instead, please use `v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])`."
        "Output is equivalent up to float precision."
    )
    image = pil.fromarray(np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3) * 10)
    new = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    a, b = old(image), new(image)
    assert a.dtype == b.dtype == torch.float32
    difference = (a - b.as_subclass(torch.Tensor)).abs().max().item()
    assert difference < 1e-7  # "equivalent up to float precision": x / 255 vs x * (1 / 255)


def test_v1_to_tensor_does_not_warn() -> None:
    import_torchvision()
    from torchvision import transforms

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        transforms.ToTensor()
