"""One analysis of one document version, and its findings as LSP diagnostics.

Runs in a worker thread: it only reads its arguments and returns a new result object.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from lsprotocol import types

from ..analysis import REGISTRY, Config, Document, Finding, Severity, analyse
from ..docs import doc_url
from .outline import Outline
from .positions import PositionMapper

log = logging.getLogger(__name__)

SOURCE = "torchdoctor"
SEVERITIES = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFORMATION: types.DiagnosticSeverity.Information,
    Severity.HINT: types.DiagnosticSeverity.Hint,
}
# The rules about an API that is deprecated, removed or renamed: editors draw their ranges struck
# through (the Deprecated tag). The rest of the TD7xx API family (unsafe torch.load, unstable
# formulas, a wrong torch.compile keyword, private names, missing seeds) concerns APIs that are
# current, and striking them through would say the opposite of the message.
DEPRECATED_CODES = frozenset(
    {
        "TD701",  # torchvision-pretrained: pretrained= deprecated since torchvision 0.13
        "TD703",  # deprecated-amp: torch.cuda.amp.*
        "TD704",  # variable-wrapper: the Variable API
        "TD706",  # trainer-renamed-args: evaluation_strategy=
        "TD707",  # removed-function
        "TD708",  # deprecated-function
        "TD711",  # transforms-v2-totensor: v2.ToTensor
        "TD713",  # deprecated-loss-args: size_average= / reduce=
    }
)


@dataclass
class AnalysisResult:
    uri: str
    version: int
    generation: int  # which settings/config produced it
    document: Document
    findings: list[Finding]
    diagnostics: list[types.Diagnostic]
    encoding: str
    seconds: float = 0.0
    failed_rules: tuple[str, ...] = ()
    # imports and nn.Module classes, computed on first hover or CodeLens for this version
    outline: Outline | None = field(default=None, repr=False)
    # set when the result is accepted as current; pull clients send it back to ask "changed?"
    result_id: str = ""

    @property
    def mapper(self) -> PositionMapper:
        return PositionMapper(self.document.index.lines, self.encoding)


def analyse_version(
    *,
    uri: str,
    version: int,
    generation: int,
    text: str,
    path: str,
    config: Config,
    encoding: str,
    locale: str,
    parse: Callable[[str, str], Document] = Document.parse,
) -> AnalysisResult:
    started = time.perf_counter()
    document = parse(text, path)
    findings, failed = run_rules(document, config)
    mapper = PositionMapper(document.index.lines, encoding)
    diagnostics = [to_diagnostic(finding, mapper, locale) for finding in findings]
    return AnalysisResult(
        uri,
        version,
        generation,
        document,
        findings,
        diagnostics,
        encoding,
        time.perf_counter() - started,
        tuple(failed),
    )


def run_rules(document: Document, config: Config) -> tuple[list[Finding], list[str]]:
    """All findings; when a rule crashes on some half-typed code, the other rules still report.

    The engine runs every rule in one call, so a crash is isolated by re-running rule by rule.
    The always-on rules (TD000) run in every one of those calls: each run keeps only the
    findings of its own rule, so a syntax error is shown once.
    """
    try:
        return analyse(document, config), []
    except Exception:
        log.exception("the analysis of %s failed; running the rules one by one", document.path)
    findings: list[Finding] = []
    failed: list[str] = []
    for code in sorted(config.enabled_codes(document.path) | REGISTRY.always_on):
        try:
            alone = analyse(document, replace(config, select=(code,), extend_select=()))
            findings.extend(finding for finding in alone if finding.code == code)
        except Exception:
            log.exception("rule %s failed on %s", code, document.path)
            failed.append(code)
    findings.sort(key=lambda f: (f.span.start_line, f.span.start_col, f.code))
    return findings, failed


def to_diagnostic(finding: Finding, mapper: PositionMapper, locale: str) -> types.Diagnostic:
    tags = [types.DiagnosticTag.Deprecated] if finding.code in DEPRECATED_CODES else None
    return types.Diagnostic(
        range=mapper.range(finding.span),
        message=finding.message,
        severity=SEVERITIES[finding.severity],
        code=finding.code,
        code_description=types.CodeDescription(href=rule_page_url(finding.code, locale)),
        source=SOURCE,
        tags=tags,
        data=fix_data(finding, mapper),
    )


@lru_cache(maxsize=512)
def rule_page_url(code: str, locale: str) -> str:
    """The rule page's file: URI; finding it on disk costs a resolve() per call, and a file of
    a few thousand lines has dozens of findings per keystroke."""
    return doc_url(code, locale)


def fix_data(finding: Finding, mapper: PositionMapper) -> dict[str, Any] | None:
    """The finding's fix as plain JSON, in client positions, for clients that apply it
    themselves; the server's own code actions recompute it from the findings it holds."""
    if finding.fix is None:
        return {"name": finding.name}
    edits = [
        {
            "range": _range_json(mapper.range(edit.span)),
            "newText": edit.content,
        }
        for edit in finding.fix.edits
    ]
    return {
        "name": finding.name,
        "fix": {"title": finding.fix.title, "safe": finding.fix.safe, "edits": edits},
    }


def _range_json(value: types.Range) -> dict[str, Any]:
    return {
        "start": {"line": value.start.line, "character": value.start.character},
        "end": {"line": value.end.line, "character": value.end.character},
    }
