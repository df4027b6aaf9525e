"""Layout rules: where tensors live and how they are laid out in memory. `.view()` on a
transposed tensor, float64 leaking in from numpy, moves that are thrown away, tensors created on
the CPU inside `forward()`, host syncs and host-to-device copies repeated on every training step,
and `torch.tensor()` of a tensor."""

from . import (
    td201_view_after_transpose,
    td202_float64_leak,
    td203_discarded_to,
    td204_device_less_tensor_in_forward,
    td205_host_sync_in_loop,
    td206_repeated_host_to_device,
    td207_tensor_from_tensor,
)

__all__ = [
    "td201_view_after_transpose",
    "td202_float64_leak",
    "td203_discarded_to",
    "td204_device_less_tensor_in_forward",
    "td205_host_sync_in_loop",
    "td206_repeated_host_to_device",
    "td207_tensor_from_tensor",
]
