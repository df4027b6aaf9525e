"""The last probe report of each open document, and where its lines are in the current text.

A report describes the text that was probed. After an edit it is stale: it stays visible, marked
so, and a measurement is shown only where the line it was taken on still exists with exactly
the same text (at the same line, or moved by lines added or removed elsewhere when that text
occurs once). Lines that changed lose their measurements: an old shape on a rewritten line would
be a wrong answer, not an old one.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..analysis.lines import LineIndex
from ..probe.schema import LineRow, ModuleRow, ProbeReport, RuntimeFinding


@dataclass(frozen=True)
class ProbeSnapshot:
    uri: str
    class_name: str
    user_path: str  # the file as the report names it
    lines: tuple[str, ...]  # the probed text
    report: ProbeReport
    # 1-based first and last line of the probed class's `forward`, when the class defines one
    forward: tuple[int, int] | None

    @classmethod
    def of(
        cls, uri: str, class_name: str, user_path: str, text: str, report: ProbeReport
    ) -> ProbeSnapshot:
        return cls(
            uri, class_name, user_path, LineIndex.of(text).lines, report, _forward(text, class_name)
        )

    def in_file(self, file: str | None) -> bool:
        return file is not None and _same_file(file, self.user_path)

    def forward_rows(self) -> list[LineRow]:
        """The report's lines inside the probed class's `forward`."""
        rows = [row for row in self.report.lines if self.in_file(row.file)]
        if self.forward is None:
            return [row for row in rows if row.function == "forward"]
        first, last = self.forward
        return [row for row in rows if first <= row.line <= last]

    def module_rows(self) -> list[ModuleRow]:
        return [row for row in self.report.modules if row.line and self.in_file(row.file)]

    def findings(self) -> list[RuntimeFinding]:
        return [row for row in self.report.findings if row.line and self.in_file(row.file)]


class LineAnchors:
    """Maps 0-based lines of the probed text to the current text."""

    def __init__(self, probed: Sequence[str], current: Sequence[str]) -> None:
        self.probed = probed
        self.current = current
        self.stale = tuple(probed) != tuple(current)
        self._where: dict[str, list[int]] | None = None

    def find(self, line: int) -> int | None:
        if not 0 <= line < len(self.probed):
            return None
        if not self.stale:
            return line
        text = self.probed[line]
        if line < len(self.current) and self.current[line] == text:
            return line
        if not text.strip():
            return None
        if self._where is None:
            self._where = {}
            for number, current in enumerate(self.current):
                self._where.setdefault(current, []).append(number)
        places = self._where.get(text, [])
        return places[0] if len(places) == 1 else None


@dataclass
class ProbeResults:
    """Per document URI, the last successful probe (a new probe of any class replaces it)."""

    _by_uri: dict[str, ProbeSnapshot] = field(default_factory=dict)

    def put(self, snapshot: ProbeSnapshot) -> None:
        self._by_uri.pop(snapshot.uri, None)  # re-inserted last: `all()` lists newest first
        self._by_uri[snapshot.uri] = snapshot

    def get(self, uri: str) -> ProbeSnapshot | None:
        return self._by_uri.get(uri)

    def all(self) -> list[ProbeSnapshot]:
        """Every document's last probe, newest first (a forward runs through other files too)."""
        return list(reversed(self._by_uri.values()))

    def forget(self, uri: str) -> None:
        self._by_uri.pop(uri, None)


def _same_file(a: str, b: str) -> bool:
    return a == b or os.path.realpath(a) == os.path.realpath(b)


def _forward(text: str, class_name: str) -> tuple[int, int] | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    if item.name == "forward":
                        return item.lineno, item.end_lineno or item.lineno
    return None
