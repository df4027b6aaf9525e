"""Every rule on one document, as the editor runs them: a crashing rule costs its own findings
and is reported, never the others'. Needs no protocol library (see early_start.py)."""

from __future__ import annotations

import logging

from ..analysis import Config, Document, Finding, analyse
from ..analysis.incremental import IncrementalAnalyser
from ..analysis.rule_runner import InternalError, collecting_internal_errors

log = logging.getLogger("torchdoctor.lsp.diagnostics")

# Documents from this size on (about 7,000 lines) take a second or more to analyse: they take
# turns in a lane of their own (scheduler.py)
LARGE_DOCUMENT_BYTES = 256 * 1024


def utf8_size(text: str) -> int:
    """The text's size in bytes as a file on disk (UTF-8); cheap for ASCII text."""
    if text.isascii():
        return len(text)
    # a client may send lone surrogates; they count as the 3 bytes they would take
    return len(text.encode("utf-8", "surrogatepass"))


def run_rules(document: Document, config: Config) -> tuple[list[Finding], list[InternalError]]:
    """All findings, and the rules that crashed on this document: the engine runs each rule
    isolated (analysis/rule_runner.py), so a crash costs that rule's findings only and is never
    a reason to run the analysis again."""
    with collecting_internal_errors() as crashes:
        try:
            findings = analyse(document, config)
        except Exception as error:  # a bug outside the rules: no findings, and say so
            log.exception("the analysis of %s failed", document.path)
            return [], [*crashes, InternalError.of("analysis", document.path, error)]
    return findings, list(crashes)


def analyse_incrementally(
    analyser: IncrementalAnalyser, text: str, path: str, config: Config
) -> tuple[Document, list[Finding], list[InternalError]]:
    """`run_rules` of the version, redoing only what the edit changed (analysis/scoped.py)."""
    with collecting_internal_errors() as crashes:
        try:
            document, findings = analyser.analyse(text, config, path)
        except Exception as error:  # a bug outside the rules: no findings, and say so
            log.exception("the analysis of %s failed", path)
            analyser.forget()
            return (
                Document.parse(text, path),
                [],
                [*crashes, InternalError.of("analysis", path, error)],
            )
    if crashes:
        analyser.forget()  # the findings kept for the next version lack the crashed rules'
    return document, findings, list(crashes)
