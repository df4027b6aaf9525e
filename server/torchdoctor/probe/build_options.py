"""The probe's build options as the client checks them before any interpreter starts:
constructor arguments, a factory, the model dtype, autocast and memory format."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .init_args import InitArgumentError, parse_factory
from .input_spec import DTYPE_ALIASES, parse_dtype
from .precision import AMP_DTYPES, MODEL_DTYPES


class BuildOptionError(ValueError):
    """A build option the runner would refuse."""


@dataclass(frozen=True)
class BuildOptions:
    init: dict[str, Any] | None = None
    """Keyword arguments for the model's __init__ (JSON values)."""
    factory: str | None = None
    """`module:function` returning the model, imported as the project sees it."""
    dtype: str | None = None
    """bfloat16, float16 or float32 (aliases accepted): the model is converted to it."""
    amp: str | None = None
    """"auto", "bfloat16" or "float16": forward runs under torch.autocast."""
    channels_last: bool = False

    def validated(self) -> BuildOptions:
        if self.init is not None:
            if not isinstance(self.init, dict):
                raise BuildOptionError(f"init must be an object of keyword arguments: {self.init}")
            try:
                json.dumps(self.init)
            except (TypeError, ValueError) as exc:
                raise BuildOptionError(f"init must hold JSON values only: {exc}") from None
            bad = [key for key in self.init if not str(key).isidentifier()]
            if bad:
                raise BuildOptionError(f"init has keys that are not argument names: {bad}")
        if self.factory is not None:
            try:
                parse_factory(self.factory)
            except InitArgumentError as exc:
                raise BuildOptionError(str(exc)) from None
            if self.init:
                raise BuildOptionError("--factory takes no --init: the factory builds the model")
        dtype = self.dtype
        if dtype is not None:
            try:
                dtype = parse_dtype(dtype)
            except ValueError as exc:
                raise BuildOptionError(str(exc)) from None
            if dtype not in MODEL_DTYPES:
                raise BuildOptionError(f"--dtype must be one of {', '.join(MODEL_DTYPES)}")
        amp = self.amp
        if amp is not None:
            amp = amp if amp == "auto" else DTYPE_ALIASES.get(amp.lower())
            if amp not in AMP_DTYPES:
                raise BuildOptionError("--amp takes bfloat16, float16 or nothing (auto)")
        return BuildOptions(self.init, self.factory, dtype, amp, bool(self.channels_last))

    def runner_arguments(self) -> list[str]:
        arguments: list[str] = []
        if self.init is not None:
            arguments += ["--init", json.dumps(self.init)]
        if self.factory is not None:
            arguments += ["--factory", self.factory]
        if self.dtype is not None:
            arguments += ["--dtype", self.dtype]
        if self.amp is not None:
            arguments.append("--amp")
            if self.amp != "auto":
                arguments += ["--amp-dtype", self.amp]
        if self.channels_last:
            arguments.append("--channels-last")
        return arguments

    def request_fields(self) -> dict[str, Any]:
        """The worker request's fields (absent when unset: older runners refuse unknown ones)."""
        fields: dict[str, Any] = {}
        if self.init is not None:
            fields["init"] = self.init
        if self.factory is not None:
            fields["factory"] = self.factory
        if self.dtype is not None:
            fields["dtype"] = self.dtype
        if self.amp is not None:
            fields["amp"] = self.amp
        if self.channels_last:
            fields["channels_last"] = True
        return fields
