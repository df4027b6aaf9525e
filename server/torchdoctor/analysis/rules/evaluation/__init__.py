"""Evaluation rules: evaluation loops that record autograd graphs, that run the model in training
mode, and epoch loops that switch to eval mode and never switch back."""

from . import (
    td401_eval_without_no_grad,
    td402_eval_without_model_eval,
    td403_train_mode_not_restored,
)

__all__ = [
    "td401_eval_without_no_grad",
    "td402_eval_without_model_eval",
    "td403_train_mode_not_restored",
]
