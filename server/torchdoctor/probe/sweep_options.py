"""The batch-size sweep's options as the client sends them to the runner (`--batch-sweep`,
`--max-memory`). The sweep itself runs in the runner (batch_sweep.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_SIZES = re.compile(r"auto|\d+(,\d+)*")


class SweepOptionError(ValueError):
    pass


@dataclass(frozen=True)
class SweepOptions:
    batch_sweep: str | None = None
    """None: no sweep; "auto": doubling batch sizes; "1,2,8": those sizes."""
    max_memory_bytes: int | None = None
    """Largest peak memory a batch may need to count as fitting (default: the GPU's memory)."""

    def validated(self) -> SweepOptions:
        sizes = self.batch_sweep
        if sizes is not None:
            sizes = sizes.replace(" ", "").lower()
            if not _SIZES.fullmatch(sizes) or any(p == "0" for p in sizes.split(",")):
                raise SweepOptionError(
                    f"--batch-sweep takes auto or positive sizes like 1,2,8: {self.batch_sweep!r}"
                )
        cap = self.max_memory_bytes
        if cap is not None and (type(cap) is not int or cap < 1):
            raise SweepOptionError(f"--max-memory must be a positive number: {cap!r}")
        if cap is not None and sizes is None:
            raise SweepOptionError("--max-memory applies to --batch-sweep: give both")
        return SweepOptions(sizes, cap)

    def runner_arguments(self) -> list[str]:
        arguments: list[str] = []
        if self.batch_sweep is not None:
            arguments += ["--batch-sweep", self.batch_sweep]
        if self.max_memory_bytes is not None:
            arguments += ["--max-memory", str(self.max_memory_bytes)]
        return arguments

    def request_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if self.batch_sweep is not None:
            fields["batch_sweep"] = self.batch_sweep
        if self.max_memory_bytes is not None:
            fields["max_memory_bytes"] = self.max_memory_bytes
        return fields
