"""The analysis entry point: source text in, findings out. Pure; never imports torch."""

from __future__ import annotations

import logging
from dataclasses import replace

from . import rules as _rules  # noqa: F401  (importing registers every rule)
from .config import Config
from .context import RuleContext
from .document import Document
from .findings import REGISTRY, Finding, Severity
from .gc_pause import gc_paused
from .noqa import find_suppressions

log = logging.getLogger(__name__)


def analyse(doc: Document, config: Config | None = None) -> list[Finding]:
    """All findings for a parsed document, filtered by selection, noqa and severity overrides."""
    with gc_paused():
        return _analyse(doc, config or Config())


def _analyse(doc: Document, config: Config) -> list[Finding]:
    enabled = config.enabled_codes(doc.path) | REGISTRY.always_on
    context = RuleContext(doc, doc.semantics, config)
    suppressions = find_suppressions(doc.index.lines)
    findings: list[Finding] = []
    for code in sorted(enabled):
        rule = REGISTRY.rules[code]
        try:
            produced = list(rule.check(context))
        except RecursionError:
            # absurdly deep expressions: skip the rule for this file rather than fail
            log.warning("%s skipped on %s: expression nesting too deep", code, doc.path)
            continue
        for finding in produced:
            if finding.code not in enabled:
                continue
            suppression = suppressions.get(finding.span.start_line)
            if suppression is not None and suppression.covers(finding.code):
                continue
            severity = config.severity_for(finding.code, finding.severity)
            if severity is not finding.severity:
                finding = _with_severity(finding, severity)
            findings.append(finding)
    findings.sort(key=lambda f: (f.span.start_line, f.span.start_col, f.code))
    return findings


def check(text: str, path: str = "<stdin>", config: Config | None = None) -> list[Finding]:
    """Parse and analyse source text."""
    # one pause for both: between two pauses the collector would scan the whole new tree
    with gc_paused():
        return analyse(Document.parse(text, path), config)


def _with_severity(finding: Finding, severity: Severity) -> Finding:
    return replace(finding, severity=severity)
