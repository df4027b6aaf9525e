"""The build options of a `torchdoctor.server.probe` request: constructor arguments, dtype,
autocast and memory format, as the editor's *Probe with arguments…* sends them:
`{"uri", "className", "input"?, "init"?: {...}, "factory"?: "mod:fn", "dtype"?: "bfloat16",
"amp"?: true | "float16", "channelsLast"?: true}`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..probe.build_options import BuildOptionError, BuildOptions


def build_options(arguments: tuple[Any, ...]) -> BuildOptions:
    """ValueError (an invalid-params answer) for a field of the wrong type or value."""
    if len(arguments) != 1 or not isinstance(arguments[0], Mapping):
        return BuildOptions()  # the positional form carries no build options
    payload = arguments[0]
    init = payload.get("init")
    if init is not None and not isinstance(init, Mapping):
        raise ValueError('`init` must be an object of keyword arguments, e.g. {"num_classes": 5}')
    factory = payload.get("factory")
    dtype = payload.get("dtype")
    amp = payload.get("amp")
    if amp is True:
        amp = "auto"
    elif amp is False:
        amp = None
    channels_last = payload.get("channelsLast", False)
    for name, value in (("factory", factory), ("dtype", dtype), ("amp", amp)):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"`{name}` must be a string")
    if not isinstance(channels_last, bool):
        raise ValueError("`channelsLast` must be true or false")
    try:
        return BuildOptions(
            dict(init) if init is not None else None, factory, dtype, amp, channels_last
        ).validated()
    except BuildOptionError as error:
        raise ValueError(str(error)) from None
