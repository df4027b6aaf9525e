"""TD205: `.item()` copies a value to the host; accumulating with `.detach()` stays on the device
and gives the same total. On CUDA, `.item()` is a synchronizing operation."""

import pytest
import torch
from torch import nn


def _losses(n: int) -> list[torch.Tensor]:
    model = nn.Linear(4, 1)
    return [model(torch.randn(8, 4)).pow(2).mean() for _ in range(n)]


def test_item_returns_a_python_number() -> None:
    assert isinstance(_losses(1)[0].item(), float)


def test_detached_accumulation_gives_the_same_total() -> None:
    losses = _losses(5)
    on_host = 0.0
    on_device = 0.0
    for loss in losses:
        on_host += loss.item()
        on_device += loss.detach()
    assert isinstance(on_device, torch.Tensor) and on_device.grad_fn is None
    assert on_device.item() == pytest.approx(on_host, rel=1e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_item_synchronizes_with_the_gpu() -> None:
    loss = torch.ones(3, device="cuda").sum()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with pytest.raises(RuntimeError, match="synchroniz"):
            loss.item()
        loss.detach()  # no sync
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_blocking_copy_to_the_gpu_synchronizes_too() -> None:
    # why TD205 stays quiet in a loop that moves each batch with a blocking `.to(device)`: that
    # copy already waits for the stream, while a non-blocking copy of pinned memory does not
    batch = torch.ones(1024)
    pinned = batch.pin_memory()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with pytest.raises(RuntimeError, match="synchroniz"):
            batch.to("cuda")
        pinned.to("cuda", non_blocking=True)  # no sync
    finally:
        torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
