"""The shapes-by-line results as LSP inlay hints and hovers, for any open document the last
probes ran through (the probed file, or a helper module it imports)."""

from __future__ import annotations

import re

from lsprotocol import types

from ..probe.shape_schema import LineShapes
from .columns import units_of
from .diagnostics import AnalysisResult
from .local_shapes import RowsForFile, local_hover, rows_for, same_file, shape_hints
from .probe_results import ProbeResults

STALE = {"en": "stale", "zh-CN": "已过期"}
# the line table's hint starts with the shape of the line's last torch call: the named shapes
# replace it, the time share and memory after it stay
_LEADING_SHAPE = re.compile(r"^→ \([^)]*\)(?: · )?")


def rows_of_document(results: ProbeResults, result: AnalysisResult) -> RowsForFile | None:
    """The newest probe's rows for this document's file; the probed text when it is the file
    that probe was started from."""
    path = result.document.path
    own = results.get(result.uri)
    snapshots = ([own] if own is not None else []) + [s for s in results.all() if s is not own]
    for snapshot in snapshots:
        info = snapshot.report.line_shapes
        if info is None:
            continue
        rows: tuple[LineShapes, ...] = rows_for(info.lines, path)
        if snapshot is own:
            rows = rows or rows_for(info.lines, snapshot.user_path)
            if rows:
                return RowsForFile(rows, snapshot.lines)
        elif rows and not same_file(snapshot.user_path, path):
            return RowsForFile(rows)
    return None


def with_local_shapes(
    hints: list[types.InlayHint],
    results: ProbeResults,
    result: AnalysisResult,
    visible: types.Range,
    scope: str,
    locale: str,
) -> list[types.InlayHint]:
    """`hints` (the line table's) with the named shapes of every line that bound a tensor."""
    source = rows_of_document(results, result)
    if source is None:
        return hints
    lines = result.document.index.lines
    by_line = {hint.position.line: hint for hint in hints}
    merged = list(hints)
    stale_word = STALE.get(locale, STALE["en"])
    for shape in shape_hints(source, lines, result.document.tree, scope):
        if not visible.start.line <= shape.line <= visible.end.line:
            continue
        label = shape.label + (f" ({stale_word})" if shape.stale else "")
        existing = by_line.get(shape.line)
        if existing is not None and isinstance(existing.label, str):
            rest = _LEADING_SHAPE.sub("", existing.label)
            existing.label = f"{shape.label} · {rest}" if rest else label
            existing.tooltip = f"{shape.tooltip}\n{existing.tooltip or ''}".strip()
            continue
        text = result.document.index.line(shape.line)
        merged.append(
            types.InlayHint(
                position=types.Position(shape.line, units_of(text, result.encoding)),
                label=label,
                padding_left=True,
                tooltip=shape.tooltip,
            )
        )
    return sorted(merged, key=lambda hint: (hint.position.line, hint.position.character))


def local_hover_markdown(
    results: ProbeResults, result: AnalysisResult, line: int, column: int
) -> str | None:
    source = rows_of_document(results, result)
    if source is None:
        return None
    lines = result.document.index.lines
    return local_hover(source, lines, result.document.tree, line, column)
