"""What the probe's passes measured so far, so a failure in a later pass loses none of it.

Loaded by runner/ from the file next to it; standard library only.

Two ways a pass can fail once the model is built and its input chosen:

- backward raises (an in-place op on a tensor autograd saved, a custom Function's bug): the
  probe goes on forward-only, and the report names the failed pass in `failed_passes`, with a
  `backward_error` finding at the user's line;
- anything else raises in a pass (an OOM while timing, a forward that fails only under the
  profiler): the error event says which pass failed (`failed_pass`) and carries the report
  fields measured before it (`partial`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class PassFailure:
    stage: str
    """The pass that failed first: "shapes", "checks", "flops", "timing", "memory", "profile"."""
    kind: str
    """"backward" (the probe went on forward-only)."""
    message: str
    file: str | None
    line: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage, "kind": self.kind, "message": self.message,
            "file": self.file, "line": self.line,
        }


@dataclass
class PassOutcomes:
    """Fields of the report measured so far, and the passes that failed."""

    kept: dict[str, Any] = field(default_factory=dict)
    failed: list[PassFailure] = field(default_factory=list)

    def keep(self, **fields: Any) -> None:
        self.kept.update(fields)

    def note_backward_failure(self, stage: str, message: str, where: Any) -> None:
        file, line = where if where else (None, None)
        self.failed.append(PassFailure(stage, "backward", message, file, line))

    def annotate(self, failure: BaseException, stage: str | None) -> None:
        """A ProbeFailure raised once the passes began leaves with the name of the pass it
        happened in and the report fields measured before it."""
        extra = getattr(failure, "extra", None)
        if not self.kept or stage is None or not isinstance(extra, dict):
            return
        extra.setdefault("failed_pass", stage)
        extra.setdefault("partial", {**self.kept, "failed_passes": self.failed_rows()})

    def failed_rows(self) -> list[dict[str, Any]]:
        return [failure.to_dict() for failure in self.failed]
