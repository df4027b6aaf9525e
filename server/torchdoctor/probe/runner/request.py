"""Requests: one probe's settings, from the command line or a worker's JSON line."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .companions import companion_module
from .events import ProbeFailure
from .inputs import parse_input_spec

if TYPE_CHECKING:  # the same file, as the type checker sees it inside the package
    from torchdoctor.probe import input_spec
else:
    input_spec = companion_module("input_spec")

DEFAULT_ITERS = 10
DEFAULT_WARMUP = 2
DEFAULT_TIMING_BUDGET_S = 4.0
DEVICE_CHOICES = ("auto", "cpu", "cuda")


@dataclass
class ProbeRequest:
    file: str
    target: str
    input: str | None = None
    device: str = "auto"
    iters: int = DEFAULT_ITERS
    warmup: int = DEFAULT_WARMUP
    threads: int | None = None
    explain: bool = False
    timing_budget_s: float = DEFAULT_TIMING_BUDGET_S
    cwd: str | None = None
    # the user's file when `file` is a copy of unsaved text: its folder and package are used
    origin: str | None = None
    memory_limit_bytes: int | None = None  # RLIMIT_AS for the probe's child (CPU only)
    batch_sweep: str | None = None  # "auto" (doubling) or "1,2,8": run the batch-size sweep
    max_memory_bytes: int | None = None  # the sweep's memory cap (default: the GPU's memory)
    init: dict[str, Any] | None = None  # keyword arguments for the model's __init__
    factory: str | None = None  # `module:function` that returns the model
    dtype: str | None = None  # convert the model (and floating inputs) to this dtype
    amp: str | None = None  # "auto", "bfloat16", "float16": forward under torch.autocast
    channels_last: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProbeRequest:
        allowed = set(cls.__dataclass_fields__)
        unknown = set(data) - allowed - {"id", "op"}
        if unknown:
            raise ProbeFailure("usage", f"unknown request fields: {sorted(unknown)}")
        fields = {k: v for k, v in data.items() if k in allowed}
        if not isinstance(fields.get("file"), str) or not isinstance(fields.get("target"), str):
            raise ProbeFailure("usage", "a request needs string fields 'file' and 'target'")
        request = cls(**fields)
        request.validate()
        return request

    def validate(self) -> None:
        if self.device not in DEVICE_CHOICES:
            raise ProbeFailure("usage", f"device must be one of {DEVICE_CHOICES}: {self.device!r}")
        if not isinstance(self.iters, int) or not 1 <= self.iters <= 10_000:
            raise ProbeFailure("usage", f"iters must be an integer from 1 to 10000: {self.iters!r}")
        if not isinstance(self.warmup, int) or not 0 <= self.warmup <= 1000:
            raise ProbeFailure("usage", f"warmup must be an integer, 0 to 1000: {self.warmup!r}")
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise ProbeFailure("usage", f"threads must be a positive integer: {self.threads!r}")
        if not isinstance(self.timing_budget_s, (int, float)) or self.timing_budget_s <= 0:
            raise ProbeFailure("usage", "timing_budget_s must be a positive number")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", self.target):
            raise ProbeFailure("usage", f"target must be a class or function name: {self.target!r}")
        if self.input is not None:
            parse_input_spec(self.input)
        if self.origin is not None and not isinstance(self.origin, str):
            raise ProbeFailure("usage", f"origin must be a path: {self.origin!r}")
        limit = self.memory_limit_bytes
        if limit is not None and (type(limit) is not int or limit < 1):
            raise ProbeFailure("usage", f"memory_limit_bytes must be a positive integer: {limit!r}")
        self.validate_sweep()
        self.validate_construction()

    def validate_sweep(self) -> None:
        cap = self.max_memory_bytes
        if cap is not None and (type(cap) is not int or cap < 1):
            raise ProbeFailure("usage", f"max_memory_bytes must be a positive integer: {cap!r}")
        if self.batch_sweep is not None:
            try:
                companion_module("batch_sweep").parse_sizes(str(self.batch_sweep))
            except ValueError as exc:
                raise ProbeFailure("usage", f"batch_sweep: {exc}") from None

    def validate_construction(self) -> None:
        """--init, --factory, --dtype, --amp, --channels-last (construct.py, precision.py)."""
        init_args = companion_module("init_args")
        precision = companion_module("precision")
        if self.init is not None and not isinstance(self.init, dict):
            raise ProbeFailure("usage", f"init must be a JSON object: {self.init!r}")
        if self.factory is not None:
            try:
                init_args.parse_factory(self.factory)
            except init_args.InitArgumentError as exc:
                raise ProbeFailure("usage", str(exc)) from None
            if self.init:
                raise ProbeFailure("usage", "--factory takes no --init: the factory builds it")
        if self.dtype is not None:
            try:
                self.dtype = input_spec.parse_dtype(self.dtype)
            except ValueError as exc:
                raise ProbeFailure("usage", str(exc)) from None
            if self.dtype not in precision.MODEL_DTYPES:
                raise ProbeFailure(
                    "usage", f"--dtype must be one of {', '.join(precision.MODEL_DTYPES)}"
                )
        if self.amp is not None:
            amp = self.amp if self.amp == "auto" else input_spec.DTYPE_ALIASES.get(self.amp)
            if amp not in precision.AMP_DTYPES:
                raise ProbeFailure("usage", "--amp takes bfloat16, float16 or nothing (auto)")
            self.amp = amp
        if not isinstance(self.channels_last, bool):
            raise ProbeFailure("usage", f"channels_last must be a boolean: {self.channels_last!r}")
