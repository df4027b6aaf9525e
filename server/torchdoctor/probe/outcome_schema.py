"""Report fields for passes that failed while the probe went on (standard library only)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FailedPass:
    stage: str
    """The pass where it happened: "checks" for a backward that raised."""
    kind: str
    """"backward": the probe went on forward-only (no forward+backward figures)."""
    message: str
    """What failed and what to change, e.g. the in-place op that modified a saved tensor."""
    file: str | None
    line: int | None
    """The user's line: the in-place op, else the forward call whose backward failed."""
