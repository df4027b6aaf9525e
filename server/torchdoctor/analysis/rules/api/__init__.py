"""API rules: calls that torch, torchvision or transformers removed, renamed or deprecated,
unsafe loading, checkpointing without an explicit mode, and numerically unstable formulas.

The facts behind them (what was removed when, what replaces it) live in `symbols.py`.
Rules whose truth depends on the torch version read `ctx.torch_version`.
"""

from . import (
    td701_torchvision_pretrained,
    td702_torch_load_unsafe,
    td703_deprecated_amp,
    td704_variable_wrapper,
    td705_compile_bad_kwarg,
    td706_trainer_renamed_args,
    td707_removed_function,
    td708_deprecated_function,
    td709_checkpoint_use_reentrant,
    td710_numerically_unstable,
    td711_transforms_v2_totensor,
    td712_private_api,
    td713_deprecated_loss_args,
    td714_torchvision_module_alias,
    td715_unseeded_training,
)

__all__ = [
    "td701_torchvision_pretrained",
    "td702_torch_load_unsafe",
    "td703_deprecated_amp",
    "td704_variable_wrapper",
    "td705_compile_bad_kwarg",
    "td706_trainer_renamed_args",
    "td707_removed_function",
    "td708_deprecated_function",
    "td709_checkpoint_use_reentrant",
    "td710_numerically_unstable",
    "td711_transforms_v2_totensor",
    "td712_private_api",
    "td713_deprecated_loss_args",
    "td714_torchvision_module_alias",
    "td715_unseeded_training",
]
