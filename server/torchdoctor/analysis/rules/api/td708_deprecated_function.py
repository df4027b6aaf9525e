"""TD708 deprecated-function: A call or import of a deprecated torch function (`torch.qr`,
`torch.norm`, `functorch.*`, ...)."""

from __future__ import annotations

from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Finding, Severity, rule
from .symbol_findings import api_symbol_findings


@rule(
    "TD708",
    "deprecated-function",
    Severity.WARNING,
    "A call or import of a deprecated torch function (`torch.qr`, `torch.norm`, `functorch.*`, "
    "...).",
    fixable=True,
)
def deprecated_function(ctx: RuleContext) -> Iterator[Finding]:
    yield from api_symbol_findings(ctx, "TD708")
