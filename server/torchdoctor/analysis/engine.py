"""The analysis entry point: source text in, findings out. Pure; never imports torch."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from functools import lru_cache

from . import rules as _rules  # noqa: F401  (importing registers every rule)
from .config import Config
from .context import RuleContext
from .document import Document
from .findings import REGISTRY, Finding, Severity
from .gc_pause import gc_paused
from .rule_runner import findings_of
from .semantics import BlockIndex


def analyse(doc: Document, config: Config | None = None) -> list[Finding]:
    """All findings for a parsed document, filtered by selection, noqa and severity overrides."""
    with gc_paused():
        return run_rules(doc, config or Config())


def run_rules(
    doc: Document,
    config: Config,
    focus: list[BlockIndex] | None = None,
    codes: Collection[str] | None = None,
    exclude: Collection[str] = (),
) -> list[Finding]:
    """The findings of the enabled rules (of `codes` only, when given). With `focus`, the rules
    visit only the nodes of those blocks: they see the whole file's facts (names, kinds,
    function summaries) but report only on what the blocks hold (see scoped.py)."""
    enabled = _enabled_codes(config, doc.path, len(REGISTRY.infos))
    sem = doc.semantics if focus is None else doc.semantics.focused_on(focus)
    context = RuleContext(doc, sem, config)
    suppressions = doc.suppressions
    findings: list[Finding] = []
    chosen = enabled if codes is None else enabled.intersection(codes)
    rules = REGISTRY.rules
    # the rules whose findings need a name the file spells nowhere (`rule(spells=)`)
    unspelt = REGISTRY.skipped_on(sem)
    for code in _in_order(chosen.difference(exclude) if exclude else chosen):
        if code in unspelt:
            continue
        # a rule that raises loses its own findings only (and is recorded: rule_runner.py)
        found = findings_of(rules[code], context)
        if not found:
            continue  # most rules find nothing: no iterator made over their empty list
        for finding in found:
            if finding.code not in enabled:
                continue
            suppression = suppressions.get(finding.span.start_line)
            if suppression is not None and suppression.covers(finding.code):
                continue
            severity = config.severity_for(finding.code, finding.severity)
            if severity is not finding.severity:
                finding = _with_severity(finding, severity)
            findings.append(finding)
    if focus is not None:
        sem.derived.clear()  # the view's facts refer back to it: freed without the collector
    findings.sort(key=lambda f: (f.span.start_line, f.span.start_col, f.code))
    return findings


def check(text: str, path: str = "<stdin>", config: Config | None = None) -> list[Finding]:
    """Parse and analyse source text."""
    # One pause for both, and the document gone before it ends: the first collection after a
    # pause scans every object the pause left alive, and the tree and indexes of a file still
    # alive cost 9% of the check over 400 corpus files. Freed by reference counting inside
    # the pause, they cost the collector nothing.
    with gc_paused():
        return _parse_and_analyse(text, path, config)


def _parse_and_analyse(text: str, path: str, config: Config | None) -> list[Finding]:
    # inside check's pause: the parse and the analysis pause the collector no further
    document = Document.parse_while_paused(text, path)
    try:
        return run_rules(document, config or Config())
    finally:
        document.drop_derived_facts()  # breaks the cycles: the rest goes by reference counting


@lru_cache(maxsize=64)
def _enabled_codes(config: Config, path: str, registered: int) -> frozenset[str]:
    """The codes that run on `path`: found once per configuration and file, though each edit
    runs the rules twice (`registered`, the number of rules, keys it on the registry)."""
    return config.enabled_codes(path) | REGISTRY.always_on


@lru_cache(maxsize=64)
def _in_order(codes: frozenset[str]) -> tuple[str, ...]:
    """The codes sorted: rules run in the same order every time (sorted once per set)."""
    return tuple(sorted(codes))


def _with_severity(finding: Finding, severity: Severity) -> Finding:
    return replace(finding, severity=severity)
