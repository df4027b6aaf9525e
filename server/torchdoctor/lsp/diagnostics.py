"""One analysis of one document version, and its findings as LSP diagnostics.

Runs in a worker thread: it only reads its arguments and returns a new result object.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from lsprotocol import types

from ..analysis import Config, Document, Finding
from ..analysis.incremental import IncrementalAnalyser
from ..analysis.rule_runner import InternalError
from .diagnostic_json import SEVERITY_NUMBERS, diagnostic_json
from .outline import Outline
from .positions import PositionMapper
from .rule_runs import analyse_incrementally, run_rules

log = logging.getLogger(__name__)

SEVERITIES = {
    severity: types.DiagnosticSeverity(number) for severity, number in SEVERITY_NUMBERS.items()
}


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
    # the rules that crashed on this version (a bug in torchdoctor); the others' findings are here
    internal_errors: tuple[InternalError, ...] = ()
    # imports and nn.Module classes, computed on first hover or CodeLens for this version
    outline: Outline | None = field(default=None, repr=False)
    # set when the result is accepted as current; pull clients send it back to ask "changed?"
    result_id: str = ""
    # the diagnostics as JSON, when kept from the version before (see DiagnosticCache)
    diagnostics_json: list[str] | None = field(default=None, repr=False)

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
    analyser: IncrementalAnalyser | None = None,
    converted: DiagnosticCache | None = None,
) -> AnalysisResult:
    started = time.perf_counter()
    if analyser is None:
        document = Document.parse(text, path)
        findings, failed = run_rules(document, config)
    else:
        document, findings, failed = analyse_incrementally(analyser, text, path, config)
    mapper = PositionMapper(document.index.lines, encoding)
    diagnostics_json: list[str] | None = None
    if converted is None:
        diagnostics = [to_diagnostic(finding, mapper, locale) for finding in findings]
    else:
        moved_from = analyser.moved_from if analyser is not None else None
        diagnostics = converted.diagnostics(findings, mapper, locale, moved_from)
        diagnostics_json = converted.last_json
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
        diagnostics_json=diagnostics_json,
    )


@dataclass
class DiagnosticCache:
    """The diagnostics of one document's last version, by finding: an edit leaves most findings
    as they were (the same objects, see analysis/scoped.py), and converting and serialising
    hundreds of them again would cost more than finding them."""

    _by_finding: dict[int, CachedDiagnostic] = field(default_factory=dict)
    # the JSON text of each diagnostic of the last list made: what publishing sends
    last_json: list[str] = field(default_factory=list)

    def diagnostics(
        self,
        findings: list[Finding],
        mapper: PositionMapper,
        locale: str,
        moved_from: dict[int, tuple[Finding, int]] | None = None,
    ) -> list[types.Diagnostic]:
        """The findings' diagnostics; `moved_from` names the findings that are the last list's
        moved by whole lines (IncrementalAnalyser.moved_from): their diagnostics are moved
        too. An Enter keystroke moves every finding below it, and converting them all again
        cost more than the analysis (200 ms on 10,000 lines)."""
        previous = self._by_finding
        current: dict[int, CachedDiagnostic] = {}
        key = f"{locale}/{mapper.encoding}"
        out: list[types.Diagnostic] = []
        as_json: list[str] = []
        for finding in findings:
            entry = previous.get(id(finding))
            if entry is None or entry.finding is not finding or entry.key != key:
                entry = _moved_entry(previous, moved_from, finding, key)
            if entry is None:
                wire = diagnostic_json(finding, mapper.lines, mapper.encoding, locale)
                entry = CachedDiagnostic.of(finding, key, wire)
            current[id(finding)] = entry
            out.append(entry.diagnostic)
            as_json.append(entry.json)
        self._by_finding = current
        self.last_json = as_json
        return out


@dataclass(frozen=True)
class CachedDiagnostic:
    finding: Finding  # kept alive: the cache is keyed by its id
    key: str
    diagnostic: types.Diagnostic
    json: str
    # the JSON cut at each line number it holds (its range's, its fix's edits'): `json` is the
    # pieces with `lines` between them, and a diagnostic moved by whole lines has the same
    # pieces with its lines moved; None where the text itself holds a mark (never moved)
    pieces: tuple[str, ...] | None
    lines: tuple[int, ...]

    @classmethod
    def of(cls, finding: Finding, key: str, wire: dict[str, Any]) -> CachedDiagnostic:
        """`wire`: the finding's diagnostic_json."""
        diagnostic = diagnostic_of(wire)
        lines: list[int] = []
        marked = {**wire, "range": _line_marks(wire["range"], lines)}
        marked["data"] = _with_edit_ranges(wire["data"], lambda value: _line_marks(value, lines))
        pieces = tuple(_LINE_MARK.split(json.dumps(marked, separators=(",", ":"))))
        if len(pieces) != len(lines) + 1:  # a fix's text is the mark itself
            text = json.dumps(wire, separators=(",", ":"))
            return cls(finding, key, diagnostic, text, None, ())
        return cls(finding, key, diagnostic, _joined(pieces, lines), pieces, tuple(lines))

    def moved(self, finding: Finding, delta: int) -> CachedDiagnostic:
        """This diagnostic for `finding`, the same one moved by `delta` lines. Its columns stay:
        a finding moves with its block, whose lines (and so the client's columns in them) are
        the same, and a finding whose fix edits outside its block is never moved."""
        diagnostic = self.diagnostic
        start, end = diagnostic.range.start, diagnostic.range.end
        moved = with_range(
            diagnostic,
            types.Range(
                types.Position(start.line + delta, start.character),
                types.Position(end.line + delta, end.character),
            ),
            _with_edit_ranges(diagnostic.data, lambda value: _moved_json(value, delta)),
        )
        assert self.pieces is not None  # `_moved_entry` moves only the diagnostics cut up
        lines = tuple(line + delta for line in self.lines)
        text = _joined(self.pieces, lines)
        return CachedDiagnostic(finding, self.key, moved, text, self.pieces, lines)


# Stands for a line number in the JSON of a diagnostic while it is cut into pieces: a quoted
# string with a control character, which JSON escapes inside any string, so only a mark matches.
_MARK = "\0line\0"
_LINE_MARK = re.compile(re.escape(json.dumps(_MARK)))  # "\u0000line\u0000", quotes included


def with_range(diagnostic: types.Diagnostic, value: types.Range, data: Any) -> types.Diagnostic:
    """The diagnostic at another range, with other data (its fix's edits moved with it)."""
    return types.Diagnostic(
        range=value,
        message=diagnostic.message,
        severity=diagnostic.severity,
        code=diagnostic.code,
        code_description=diagnostic.code_description,
        source=diagnostic.source,
        tags=diagnostic.tags,
        related_information=diagnostic.related_information,
        data=data,
    )


def _with_edit_ranges(data: Any, change: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """The diagnostic's data (see `fix_data`) with each of its fix's edit ranges changed."""
    if not isinstance(data, dict) or "fix" not in data:
        return data
    fix = data["fix"]
    edits = [{**edit, "range": change(edit["range"])} for edit in fix["edits"]]
    return {**data, "fix": {**fix, "edits": edits}}


def _line_marks(value: dict[str, Any], lines: list[int]) -> dict[str, Any]:
    """A range with its line numbers replaced by marks; the numbers go to `lines`, in order."""
    start, end = value["start"], value["end"]
    lines.extend((start["line"], end["line"]))
    return {
        "start": {"line": _MARK, "character": start["character"]},
        "end": {"line": _MARK, "character": end["character"]},
    }


def _joined(pieces: tuple[str, ...], lines: Sequence[int]) -> str:
    parts = [pieces[0]]
    for line, piece in zip(lines, pieces[1:], strict=True):
        parts.append(str(line))
        parts.append(piece)
    return "".join(parts)


def _moved_entry(
    previous: dict[int, CachedDiagnostic],
    moved_from: dict[int, tuple[Finding, int]] | None,
    finding: Finding,
    key: str,
) -> CachedDiagnostic | None:
    """The previous diagnostic of a finding that only moved by whole lines, moved with it."""
    moved = moved_from.get(id(finding)) if moved_from is not None else None
    if moved is None:
        return None
    before, delta = moved
    entry = previous.get(id(before))
    if entry is None or entry.finding is not before or entry.key != key or entry.pieces is None:
        return None
    return entry.moved(finding, delta)


def _moved_json(value: dict[str, Any], delta: int) -> dict[str, Any]:
    start, end = value["start"], value["end"]
    return {
        "start": {"line": start["line"] + delta, "character": start["character"]},
        "end": {"line": end["line"] + delta, "character": end["character"]},
    }


@lru_cache(maxsize=1)
def _converter() -> Any:
    from pygls.protocol import default_converter

    return default_converter()  # type: ignore[no-untyped-call]  # pygls's factory is unannotated


def _unstructure(diagnostic: types.Diagnostic) -> dict[str, Any]:
    return _converter().unstructure(diagnostic, unstructure_as=types.Diagnostic)  # type: ignore[no-any-return]  # unstructure returns Any


def to_diagnostic(finding: Finding, mapper: PositionMapper, locale: str) -> types.Diagnostic:
    return diagnostic_of(diagnostic_json(finding, mapper.lines, mapper.encoding, locale))


def diagnostic_of(wire: dict[str, Any]) -> types.Diagnostic:
    """The protocol object of a diagnostic_json."""
    tags = wire.get("tags")
    return types.Diagnostic(
        range=_range_of(wire["range"]),
        message=wire["message"],
        severity=types.DiagnosticSeverity(wire["severity"]),
        code=wire["code"],
        code_description=types.CodeDescription(href=wire["codeDescription"]["href"]),
        source=wire["source"],
        tags=[types.DiagnosticTag(tag) for tag in tags] if tags is not None else None,
        data=wire["data"],
    )


def _range_of(value: dict[str, Any]) -> types.Range:
    start, end = value["start"], value["end"]
    return types.Range(
        types.Position(start["line"], start["character"]),
        types.Position(end["line"], end["character"]),
    )
