"""Autograd rules: gradients that are never zeroed, zeroed at the wrong time, graphs walked twice,
and loss tensors kept alive across iterations."""

from . import (
    td101_missing_zero_grad,
    td102_zero_grad_before_step,
    td103_backward_twice,
    td104_loss_graph_leak,
    td105_requires_grad_typo,
    td106_data_attribute,
    td107_step_before_backward,
    td108_scheduler_before_optimizer,
    td109_unscaled_accumulation,
    td110_zero_grad_keeps_memory,
)

__all__ = [
    "td101_missing_zero_grad",
    "td102_zero_grad_before_step",
    "td103_backward_twice",
    "td104_loss_graph_leak",
    "td105_requires_grad_typo",
    "td106_data_attribute",
    "td107_step_before_backward",
    "td108_scheduler_before_optimizer",
    "td109_unscaled_accumulation",
    "td110_zero_grad_keeps_memory",
]
