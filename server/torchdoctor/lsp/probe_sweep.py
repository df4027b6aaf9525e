"""The batch-size sweep of a `torchdoctor.server.probe` request, as the report view's *Batch-size
sweep* button sends it: `{"uri", "className", ..., "batchSweep"?: true | "1,8,32",
"maxMemoryMiB"?: 2048}`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..probe.sweep_options import SweepOptionError, SweepOptions

MIB = 1024 * 1024


def sweep_options(arguments: tuple[Any, ...]) -> SweepOptions:
    """ValueError (an invalid-params answer) for a field of the wrong type or value."""
    if len(arguments) != 1 or not isinstance(arguments[0], Mapping):
        return SweepOptions()
    payload = arguments[0]
    sizes = payload.get("batchSweep")
    if sizes is True:
        sizes = "auto"
    elif sizes is False:
        sizes = None
    if sizes is not None and not isinstance(sizes, str):
        raise ValueError('`batchSweep` must be true or sizes such as "1,8,32"')
    memory = payload.get("maxMemoryMiB")
    if memory is not None and (
        isinstance(memory, bool) or not isinstance(memory, int | float) or memory <= 0
    ):
        raise ValueError("`maxMemoryMiB` must be a positive number of MiB")
    try:
        return SweepOptions(sizes, int(memory * MIB) if memory is not None else None).validated()
    except SweepOptionError as error:
        raise ValueError(str(error)) from None
