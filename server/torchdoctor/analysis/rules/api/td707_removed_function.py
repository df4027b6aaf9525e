"""TD707 removed-function: A call or import of a function torch removed (`torch.solve`,
`torch.symeig`, ...): it raises."""

from __future__ import annotations

from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Finding, Severity, rule
from .symbol_findings import api_symbol_findings


@rule(
    "TD707",
    "removed-function",
    Severity.ERROR,
    "A call or import of a function torch removed (`torch.solve`, `torch.symeig`, ...): it raises.",
    fixable=True,
)
def removed_function(ctx: RuleContext) -> Iterator[Finding]:
    yield from api_symbol_findings(ctx, "TD707")
