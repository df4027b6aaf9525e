"""A finding as the JSON of an LSP diagnostic, made from plain values.

This is the one place a finding becomes a diagnostic: the protocol object the server's features
use is made from this JSON (diagnostics.py), and the server's first answers, sent before the
protocol library is loaded (early_start.py), send it as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from ..analysis import Finding, Severity, Span
from ..docs import doc_url
from .columns import client_position

SOURCE = "torchdoctor"
# DiagnosticSeverity in the protocol
SEVERITY_NUMBERS = {
    Severity.ERROR: 1,
    Severity.WARNING: 2,
    Severity.INFORMATION: 3,
    Severity.HINT: 4,
}
DEPRECATED_TAG = 2  # DiagnosticTag.Deprecated
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


def diagnostic_json(
    finding: Finding, lines: Sequence[str], encoding: str, locale: str
) -> dict[str, Any]:
    """The diagnostic of `finding` in a text of `lines`, columns in the client's `encoding`;
    keys in the order the protocol library writes them."""
    wire: dict[str, Any] = {
        "range": range_json(lines, finding.span, encoding),
        "message": finding.message,
        "severity": SEVERITY_NUMBERS[finding.severity],
        "code": finding.code,
        "codeDescription": {"href": rule_page_url(finding.code, locale)},
        "source": SOURCE,
    }
    if finding.code in DEPRECATED_CODES:
        wire["tags"] = [DEPRECATED_TAG]
    wire["data"] = fix_data(finding, lines, encoding)
    return wire


def range_json(lines: Sequence[str], span: Span, encoding: str) -> dict[str, Any]:
    start_line, start = client_position(lines, span.start_line, span.start_col, encoding)
    end_line, end = client_position(lines, span.end_line, span.end_col, encoding)
    return {
        "start": {"line": start_line, "character": start},
        "end": {"line": end_line, "character": end},
    }


def fix_data(finding: Finding, lines: Sequence[str], encoding: str) -> dict[str, Any]:
    """The finding's fix as plain JSON, in client positions, for clients that apply it
    themselves; the server's own code actions recompute it from the findings it holds."""
    if finding.fix is None:
        return {"name": finding.name}
    edits = [
        {"range": range_json(lines, edit.span, encoding), "newText": edit.content}
        for edit in finding.fix.edits
    ]
    return {
        "name": finding.name,
        "fix": {"title": finding.fix.title, "safe": finding.fix.safe, "edits": edits},
    }


@lru_cache(maxsize=512)
def rule_page_url(code: str, locale: str) -> str:
    """The rule page's file: URI; finding it on disk costs a resolve() per call, and a file of
    a few thousand lines has dozens of findings per keystroke."""
    return doc_url(code, locale)
