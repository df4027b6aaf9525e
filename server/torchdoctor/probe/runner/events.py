"""Errors and events: the failure that ends a probe, the JSON-lines stream on the original
stdout, and progress by stage.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any


class ProbeFailure(Exception):
    """A probe that cannot go on; becomes one error event pointing at the user's code."""

    def __init__(
        self,
        kind: str,
        message: str,
        file: str | None = None,
        line: int | None = None,
        trace: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.file = file
        self.line = line
        self.trace = trace
        # optional event fields: `failed_pass` and `partial` (pass_outcomes.py)
        self.extra: dict[str, Any] = {}

    def to_event(self) -> dict[str, Any]:
        return {
            "event": "error",
            "kind": self.kind,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "traceback": self.trace,
            **self.extra,
        }


def json_safe(value: Any) -> Any:
    """JSON has no NaN/Infinity: those become null so every client can parse the stream."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


class EventStream:
    """Writes events to a private copy of the original stdout."""

    def __init__(self, fd: int) -> None:
        self._out = os.fdopen(fd, "w", encoding="utf-8", buffering=1)
        self.request_id: Any = None

    def fileno(self) -> int:
        return self._out.fileno()

    def emit(self, event: dict[str, Any]) -> None:
        if self.request_id is not None:
            event = {**event, "id": self.request_id}
        self._out.write(json.dumps(json_safe(event), allow_nan=False) + "\n")
        self._out.flush()


def take_over_stdout() -> EventStream:
    """Keep fd 1 for events only: the user's prints and C-level writes go to stderr."""
    sys.stdout.flush()
    event_fd = os.dup(1)
    os.dup2(2, 1)
    return EventStream(event_fd)


def take_over_stdin() -> int:
    """Keep the request pipe private: user code calling input() reads /dev/null instead.
    Returns the pipe's descriptor; its end of file tells that the client has gone."""
    request_fd = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # lives as long as the process
    return request_fd


# Percent ranges per stage, so progress is monotonic whatever the model does.
STAGE_RANGES: dict[str, tuple[int, int]] = {
    "load": (0, 4),
    "build": (4, 8),
    "input": (8, 16),
    "shapes": (16, 26),
    "checks": (26, 36),
    "flops": (36, 44),
    "timing": (44, 78),
    "memory": (78, 82),
    "profile": (82, 94),
    "sweep": (94, 96),
    "explain": (94, 99),
    "report": (99, 100),
}


class Progress:
    def __init__(self, events: EventStream) -> None:
        self._events = events
        self._percent = 0.0
        self.stage_seconds: dict[str, float] = {}
        self._stage: str | None = None
        self._stage_started = time.perf_counter()
        self.outcomes: Any = None  # pass_outcomes.PassOutcomes, once the passes begin

    @property
    def current_stage(self) -> str | None:
        return self._stage

    def stage(self, name: str, message: str, fraction: float = 0.0) -> None:
        if name != self._stage:
            self._close_stage()
            self._stage = name
            self._stage_started = time.perf_counter()
        low, high = STAGE_RANGES[name]
        percent = max(self._percent, low + (high - low) * min(max(fraction, 0.0), 1.0))
        self._percent = percent
        self._events.emit(
            {"event": "progress", "stage": name, "message": message, "percent": round(percent, 1)}
        )

    def _close_stage(self) -> None:
        if self._stage is not None:
            elapsed = time.perf_counter() - self._stage_started
            self.stage_seconds[self._stage] = self.stage_seconds.get(self._stage, 0.0) + elapsed

    def finish(self) -> dict[str, float]:
        self._close_stage()
        self._stage = None
        return {name: round(seconds, 4) for name, seconds in self.stage_seconds.items()}
