"""Output formats of `check`: text (ruff style), json (the documented contract), SARIF 2.1.0 and
GitHub workflow annotations. Each takes the per-file results and returns a string."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.markup import escape

from .. import __version__
from ..analysis import REGISTRY, Finding, Severity
from ..analysis.lines import LINE_BREAK
from ..analysis.notebook import NotebookProgram, in_cell
from ..analysis.rule_runner import InternalError
from ..docs import doc_url
from .display import display_path, json_path, uri_path

SARIF_LEVELS = {
    Severity.ERROR: "error",
    Severity.WARNING: "warning",
    Severity.INFORMATION: "note",
    Severity.HINT: "note",
}
GITHUB_LEVELS = {
    Severity.ERROR: "error",
    Severity.WARNING: "warning",
    Severity.INFORMATION: "notice",
    Severity.HINT: "notice",
}
STYLES = {
    Severity.ERROR: "bold red",
    Severity.WARNING: "bold yellow",
    Severity.INFORMATION: "bold cyan",
    Severity.HINT: "dim",
}


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    lines: tuple[str, ...] = ()
    fixed: int = 0
    diff: str = ""
    error: str | None = None
    # rules that crashed on this file (a bug in torchdoctor): reported on stderr, never in the
    # findings, whose format is a contract
    internal_errors: list[InternalError] = field(default_factory=list)
    # a notebook's code cells as one program: findings are in program lines, reported per cell
    notebook: NotebookProgram | None = None

    def in_cell(self, finding: Finding) -> tuple[int | None, Finding]:
        """The 1-based cell number (None outside notebooks) and the finding in the cell's
        own lines; its fix, when it has one, edits that cell only."""
        if self.notebook is None:
            return None, finding
        located = in_cell(self.notebook, finding)
        return located if located is not None else (None, finding)

    def source_lines(self, cell: int | None) -> tuple[str, ...]:
        placement = self.notebook.cell(cell) if self.notebook and cell is not None else None
        return tuple(LINE_BREAK.split(placement.python)) if placement else self.lines


def finding_to_json(finding: Finding, path: str) -> dict[str, object]:
    span = finding.span
    fix = None
    if finding.fix is not None:
        fix = {
            "title": finding.fix.title,
            "edits": [
                {
                    "line": edit.span.start_line + 1,
                    "column": edit.span.start_col + 1,
                    "end_line": edit.span.end_line + 1,
                    "end_column": edit.span.end_col + 1,
                    "content": edit.content,
                }
                for edit in finding.fix.edits
            ],
        }
    return {
        "code": finding.code,
        "name": finding.name,
        "severity": finding.severity.value,
        "message": finding.message,
        "path": json_path(path),
        "line": span.start_line + 1,
        "column": span.start_col + 1,
        "end_line": span.end_line + 1,
        "end_column": span.end_col + 1,
        "fix": fix,
    }


def render_json(results: Sequence[FileResult]) -> str:
    rows = [_json_row(f, result) for result in results for f in result.findings]
    return json.dumps(rows, indent=2, ensure_ascii=False)


def _json_row(finding: Finding, result: FileResult) -> dict[str, object]:
    """A notebook's finding also names its cell (1-based, markdown cells counted); its lines,
    columns and fix edits are then the cell's own."""
    cell, finding = result.in_cell(finding)
    row = finding_to_json(finding, result.path)
    if cell is not None:
        row["cell"] = cell
    return row


def render_sarif(results: Sequence[FileResult]) -> str:
    used = sorted({f.code for result in results for f in result.findings})
    rules = []
    for code in used:
        info = REGISTRY.infos[code]
        rules.append(
            {
                "id": code,
                "name": info.name,
                "shortDescription": {"text": info.summary},
                "helpUri": doc_url(code),
                "defaultConfiguration": {"level": SARIF_LEVELS[info.severity]},
            }
        )
    sarif_results = []
    for result in results:
        for original in result.findings:
            cell, finding = result.in_cell(original)
            span = finding.span
            entry: dict[str, object] = {
                "ruleId": finding.code,
                "ruleIndex": used.index(finding.code),
                "level": SARIF_LEVELS[finding.severity],
                "message": {"text": finding.message},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": uri_path(result.path)},
                            "region": {
                                "startLine": span.start_line + 1,
                                "startColumn": span.start_col + 1,
                                "endLine": span.end_line + 1,
                                "endColumn": span.end_col + 1,
                            },
                        }
                    }
                ],
            }
            if finding.fix is not None:
                entry["fixes"] = [_sarif_fix(finding, result.path)]
            if cell is not None:
                # the region counts lines within the cell, as notebook viewers show them
                entry["properties"] = {"cell": cell}
            sarif_results.append(entry)
    document = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "torchdoctor",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "rules": rules,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": sarif_results,
            }
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


def _sarif_fix(finding: Finding, path: str) -> dict[str, object]:
    assert finding.fix is not None
    return {
        "description": {"text": finding.fix.title},
        "artifactChanges": [
            {
                "artifactLocation": {"uri": uri_path(path)},
                "replacements": [
                    {
                        "deletedRegion": {
                            "startLine": edit.span.start_line + 1,
                            "startColumn": edit.span.start_col + 1,
                            "endLine": edit.span.end_line + 1,
                            "endColumn": edit.span.end_col + 1,
                        },
                        "insertedContent": {"text": edit.content},
                    }
                    for edit in finding.fix.edits
                ],
            }
        ],
    }


def render_github(results: Sequence[FileResult]) -> str:
    lines = []
    for result in results:
        for original in result.findings:
            cell, finding = result.in_cell(original)
            span = finding.span
            where = f"cell {cell}: " if cell is not None else ""
            properties = ",".join(
                [
                    f"file={_github_property(json_path(result.path))}",
                    f"line={span.start_line + 1}",
                    f"col={span.start_col + 1}",
                    f"endLine={span.end_line + 1}",
                    f"endColumn={span.end_col + 1}",
                    f"title={_github_property(f'{finding.code} {finding.name}')}",
                ]
            )
            level = GITHUB_LEVELS[finding.severity]
            lines.append(f"::{level} {properties}::{_github_data(where + finding.message)}")
    return "\n".join(lines)


def _github_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _github_property(text: str) -> str:
    return _github_data(text).replace(":", "%3A").replace(",", "%2C")


def render_text_finding(finding: Finding, result: FileResult) -> str:
    """One finding in the ruff style, as rich markup: location, code, message, source, caret."""
    cell, finding = result.in_cell(finding)
    lines = result.source_lines(cell)
    span = finding.span
    style = STYLES[finding.severity]
    fixable = " [cyan][*][/cyan]" if finding.fix is not None else ""
    location = f"{span.start_line + 1}:{span.start_col + 1}"
    if cell is not None:
        location = f"cell {cell}:{location}"
    header = (
        f"[bold]{escape(display_path(result.path))}[/bold]:{location}: "
        f"[{style}]{finding.code}[/{style}]{fixable} {escape(finding.message)}"
    )
    if not 0 <= span.start_line < len(lines):
        return header
    source = lines[span.start_line].expandtabs(4)
    raw = lines[span.start_line]
    prefix = raw[: span.start_col].expandtabs(4)
    end_col = span.end_col if span.end_line == span.start_line else len(raw)
    marked = raw[span.start_col : end_col].expandtabs(4) or " "
    number = str(span.start_line + 1)
    gutter = " " * len(number)
    caret = "^" * max(1, cell_len(marked))
    return "\n".join(
        [
            header,
            f"[blue]{number} |[/blue] {escape(source)}",
            f"[blue]{gutter} |[/blue] {' ' * cell_len(prefix)}[{style}]{caret}[/{style}]",
        ]
    )
