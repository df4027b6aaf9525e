"""Module rules: nn.Module subclasses that are not set up, submodules and tensors the module
does not know about, forward() called around the hooks, and losses fed the wrong activation."""

from . import (
    td301_missing_super_init,
    td302_unregistered_submodules,
    td303_direct_forward_call,
    td304_tensor_attribute_not_buffer,
    td305_softmax_before_cross_entropy,
    td306_sigmoid_bce_mismatch,
)

__all__ = [
    "td301_missing_super_init",
    "td302_unregistered_submodules",
    "td303_direct_forward_call",
    "td304_tensor_attribute_not_buffer",
    "td305_softmax_before_cross_entropy",
    "td306_sigmoid_bce_mismatch",
]
