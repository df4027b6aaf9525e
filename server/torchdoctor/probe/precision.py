"""Runner side of `--dtype`, `--amp` and `--channels-last`: the model and its inputs converted
once, forward run under `torch.autocast`, the loss scaled where a GradScaler belongs.

Loaded by path by runner/ inside the user's interpreter; torch is imported lazily.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

MODEL_DTYPES = ("float32", "bfloat16", "float16")
AMP_DTYPES = ("auto", "bfloat16", "float16")
LOW_PRECISION = ("bfloat16", "float16")


@dataclass
class PrecisionPlan:
    dtype: str | None
    """The dtype the model's floating parameters, buffers and inputs are converted to; None
    leaves them as built."""
    dtype_source: str
    """"argument" (--dtype), "input" (every floating input given is bf16/fp16), "model"."""
    amp: str | None
    """The autocast dtype ("bfloat16", "float16"), or None without --amp."""
    channels_last: bool
    device_type: str
    scaler: Any = None
    """A torch.amp.GradScaler for fp16 autocast on CUDA: the loss is scaled before backward,
    as a training step does (no optimizer step runs, so it is never unscaled)."""

    @contextlib.contextmanager
    def forward_context(self) -> Iterator[None]:
        if self.amp is None:
            yield
            return
        import torch

        with torch.autocast(self.device_type, dtype=getattr(torch, self.amp)):
            yield

    def scale(self, loss: Any) -> Any:
        return loss if self.scaler is None else self.scaler.scale(loss)

    def report(self, model: Any) -> dict[str, Any]:
        return {
            "dtype": parameter_dtype(model),
            "dtype_source": self.dtype_source,
            "amp": self.amp,
            "grad_scaler": self.scaler is not None,
            "memory_format": "channels_last" if self.channels_last else "contiguous",
        }


def plan_precision(
    dtype: str | None, amp: str | None, channels_last: bool, device: Any, input_dtypes: list[str]
) -> PrecisionPlan:
    """`input_dtypes`: the floating dtypes of an input the user gave (--input, a comment)."""
    import torch

    source = "argument" if dtype else "model"
    if dtype is None and input_dtypes and len(set(input_dtypes)) == 1:
        only = input_dtypes[0]
        if only in LOW_PRECISION:
            dtype, source = only, "input"  # `(8, 3, 32, 32):bf16` means a bf16 model
    amp_dtype = None
    if amp is not None:
        if amp == "auto":
            amp_dtype = "float16" if device.type == "cuda" else "bfloat16"
        else:
            amp_dtype = amp
    plan = PrecisionPlan(dtype, source, amp_dtype, channels_last, device.type)
    if amp_dtype == "float16" and device.type == "cuda":
        plan.scaler = torch.amp.GradScaler("cuda")
    return plan


def convert_model(model: Any, plan: PrecisionPlan) -> None:
    import torch

    if plan.dtype is not None:
        model.to(dtype=getattr(torch, plan.dtype))
    if plan.channels_last:
        model.to(memory_format=torch.channels_last)


def convert_inputs(value: Any, plan: PrecisionPlan) -> Any:
    """Floating tensors to the model's dtype; 4-D tensors channels-last. Integer and bool
    tensors (token ids, masks) are left alone."""
    import torch

    if isinstance(value, torch.Tensor):
        if plan.dtype is not None and value.is_floating_point():
            value = value.to(getattr(torch, plan.dtype))
        if plan.channels_last and value.dim() == 4:
            value = value.contiguous(memory_format=torch.channels_last)
        return value
    if isinstance(value, tuple):
        return tuple(convert_inputs(v, plan) for v in value)
    if isinstance(value, list):
        return [convert_inputs(v, plan) for v in value]
    if isinstance(value, dict):
        return {k: convert_inputs(v, plan) for k, v in value.items()}
    return value


def parameter_dtype(model: Any) -> str | None:
    """The dtype most floating parameter elements have (None for a model without any)."""
    counts: dict[str, int] = {}
    for parameter in model.parameters():
        if parameter.is_floating_point():
            name = str(parameter.dtype).removeprefix("torch.")
            counts[name] = counts.get(name, 0) + parameter.numel()
    return max(counts, key=counts.__getitem__) if counts else None
