"""Report fields saying how the probed model was built and at which precision it ran
(standard library only; see REPORT.md, `construction` and `precision`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ConstructionInfo:
    method: str
    """"default" (no arguments, or only library configs built from their defaults), "init"
    (--init or the editor's arguments), "comment" (`# torchdoctor: init=`), "factory"
    (--factory module:function), "example_model" (the class's example_model())."""
    detail: str
    """Which comment line, factory or hook."""
    arguments: dict[str, str] = field(default_factory=dict)
    """Each keyword argument passed to __init__, as short text (`GPT2Config(n_layer=2)`)."""


@dataclass
class PrecisionInfo:
    dtype: str | None
    """The dtype most parameters have while the probe runs; None without floating ones."""
    dtype_source: str
    """"argument" (--dtype), "input" (every floating tensor of the given input is bf16/fp16,
    so the model was converted to it), "model" (as built)."""
    amp: str | None
    """The torch.autocast dtype with --amp ("bfloat16", "float16"); None without."""
    grad_scaler: bool
    """The loss was scaled by a torch.amp.GradScaler before backward (float16 on CUDA)."""
    memory_format: str
    """"channels_last" with --channels-last, else "contiguous"."""
