"""`torchdoctor probe FILE::Class --lines`: the source of forward, and of every user function it
ran through, with the shapes each line bound printed beside it (an annotated listing)."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path

from ..lsp.local_shapes import RowsForFile, function_at, rows_for, shape_hints
from .schema import ProbeReport
from .shape_schema import LineShapes

GAP = 2  # spaces between the longest code line of a function and its annotations


@dataclass(frozen=True)
class Listing:
    file: str
    function: str
    first_line: int
    lines: list[tuple[int, str, str]]  # (1-based line, source text, annotation or "")


def listings(report: ProbeReport, read_text: dict[str, str] | None = None) -> list[Listing]:
    """One listing per function that ran, the probed class's forward first."""
    info = report.line_shapes
    if info is None:
        return []
    sources = read_text if read_text is not None else {}
    by_file: dict[str, list[LineShapes]] = {}
    for row in info.lines:
        by_file.setdefault(row.file, []).append(row)
    found: list[Listing] = []
    for file, rows in by_file.items():
        text = sources.get(file)
        if text is None:
            try:
                text = Path(file).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
        found += _file_listings(file, text, rows)
    forward = _probed_forward(report, found)
    return sorted(found, key=lambda item: (item is not forward, item.file, item.first_line))


def _file_listings(file: str, text: str, rows: list[LineShapes]) -> list[Listing]:
    try:
        tree: ast.Module | None = ast.parse(text)
    except (SyntaxError, ValueError):
        tree = None
    current = text.splitlines()
    hints = {
        hint.line + 1: hint.label
        for hint in shape_hints(RowsForFile(rows_for(rows, file)), current, tree)
    }
    functions: dict[int, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for row in rows:
        function = function_at(tree, row.line)
        if function is not None:
            functions[function.lineno] = function
    result = []
    for start, function in sorted(functions.items()):
        end = function.end_lineno or start
        lines = [(n, current[n - 1], hints.get(n, "")) for n in range(start, end + 1)]
        result.append(Listing(file, function.name, start, lines))
    return result


def _probed_forward(report: ProbeReport, found: list[Listing]) -> Listing | None:
    own = [item for item in found if _same(item.file, report.file) and item.function == "forward"]
    if not own:
        return None
    try:
        tree = ast.parse(Path(report.file).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return own[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == report.target:
            starts = {item.lineno for item in node.body if isinstance(item, ast.FunctionDef)}
            return next((item for item in own if item.first_line in starts), own[0])
    return own[0]


def _same(a: str, b: str) -> bool:
    return a == b or os.path.realpath(a) == os.path.realpath(b)


def render(listing: Listing, shown_file: str) -> list[str]:
    """Plain text lines: `  30 | q, k, v = ...    # q, k, v (2, 5, 32)`."""
    width = max((len(text.rstrip()) for _, text, _ in listing.lines), default=0) + GAP
    digits = len(str(listing.lines[-1][0])) if listing.lines else 1
    out = [f"{shown_file}:{listing.first_line}  {listing.function}"]
    for number, text, note in listing.lines:
        code = text.rstrip()
        prefix = f"{number:>{digits}} | "
        out.append(f"{prefix}{code.ljust(width)}# {note}" if note else f"{prefix}{code}")
    return out
