"""The probe's runtime findings as diagnostics on the lines they point at.

Unused parameters are TD601 when the document wraps a model in DistributedDataParallel (that is
when they break training); elsewhere they, and the other findings, carry the finding's kind as
their code. float64 and NaN/Inf are warnings, performance findings information. A stale report
keeps a finding only where its line is unchanged (see probe_results), and says so.
"""

from __future__ import annotations

from lsprotocol import types

from ..analysis import REGISTRY, Config, Severity
from ..analysis.findings import Span
from ..analysis.parallel_wrappers import DDP_CLASSES
from .diagnostic_json import rule_page_url
from .diagnostics import SEVERITIES, AnalysisResult
from .probe_results import LineAnchors, ProbeSnapshot

SOURCE = "torchdoctor probe"
DDP_CODE = "TD601"
KIND_SEVERITY = {
    "float64": types.DiagnosticSeverity.Warning,
    "nan": types.DiagnosticSeverity.Warning,
    "inf": types.DiagnosticSeverity.Warning,
    "unused_parameter": types.DiagnosticSeverity.Warning,
    "non_contiguous_view": types.DiagnosticSeverity.Information,
}
REPORT_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}
STALE_NOTE = " (from the probe of an earlier version of this file)"


def runtime_diagnostics(
    snapshot: ProbeSnapshot, result: AnalysisResult, config: Config, locale: str
) -> list[types.Diagnostic]:
    anchors = LineAnchors(snapshot.lines, result.document.index.lines)
    mapper = result.mapper
    ddp: bool | None = None  # only worked out when an unused parameter needs it
    diagnostics: list[types.Diagnostic] = []
    for finding in snapshot.findings():
        assert finding.line is not None
        line = anchors.find(finding.line - 1)
        if line is None:
            continue
        text = result.document.index.line(line)
        start = len(text) - len(text.lstrip())
        code = finding.kind
        severity = KIND_SEVERITY.get(finding.kind) or REPORT_SEVERITY.get(
            finding.severity, types.DiagnosticSeverity.Warning
        )
        description = None
        if finding.kind == "unused_parameter" and ddp is None:
            ddp = _wraps_in_ddp(result)
        if finding.kind == "unused_parameter" and ddp:
            if DDP_CODE not in config.enabled_codes(result.document.path):
                continue
            code = DDP_CODE
            info = REGISTRY.get(DDP_CODE)
            default = info.severity if info is not None else Severity.ERROR
            severity = SEVERITIES[config.severity_for(DDP_CODE, default)]
            description = types.CodeDescription(href=rule_page_url(DDP_CODE, locale))
        count = f" ({finding.count}×)" if finding.count > 1 else ""
        diagnostics.append(
            types.Diagnostic(
                range=mapper.range(Span(line, start, line, len(text))),
                message=finding.message + count + (STALE_NOTE if anchors.stale else ""),
                severity=severity,
                code=code,
                code_description=description,
                source=SOURCE,
                data={"probe": finding.kind, "detail": finding.detail},
            )
        )
    return diagnostics


def _wraps_in_ddp(result: AnalysisResult) -> bool:
    if "DistributedDataParallel" not in result.document.text:
        return False  # the semantics cost milliseconds; most files never mention DDP
    calls = result.document.semantics.calls_by_qualname
    return any(name in calls for name in DDP_CLASSES)
