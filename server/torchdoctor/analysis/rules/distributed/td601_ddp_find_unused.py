"""TD601 ddp-find-unused: Parameters get no gradient under DDP without
find_unused_parameters=True (from the probe)."""

from __future__ import annotations

from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Finding, Severity, rule


@rule(
    "TD601",
    "ddp-find-unused",
    Severity.ERROR,
    "Parameters get no gradient under DDP without find_unused_parameters=True (from the probe).",
    fixable=False,
)
def ddp_find_unused(ctx: RuleContext) -> Iterator[Finding]:
    """Which parameters stay without a gradient is only known by running the model: the probe
    reports this code; the static pass has nothing to say."""
    return iter(())
