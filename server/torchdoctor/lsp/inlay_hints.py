"""Inlay hints from the last probe: at the end of each line of the probed class's `forward` that
the report measured, the shape it produced, its share of the step's time and the memory it left
allocated. A stale report shows hints only on unchanged lines, marked stale (see probe_results)."""

from __future__ import annotations

from lsprotocol import types

from ..probe.schema import LineRow
from . import probe_format
from .columns import units_of
from .diagnostics import AnalysisResult
from .probe_results import LineAnchors, ProbeSnapshot

STALE = {"en": "stale", "zh-CN": "已过期"}


def inlay_hints(
    snapshot: ProbeSnapshot, result: AnalysisResult, visible: types.Range, locale: str
) -> list[types.InlayHint]:
    anchors = LineAnchors(snapshot.lines, result.document.index.lines)
    hints: list[types.InlayHint] = []
    for row in snapshot.forward_rows():
        line = anchors.find(row.line - 1)
        if line is None or not visible.start.line <= line <= visible.end.line:
            continue
        label = hint_label(row)
        if anchors.stale:
            label += f" ({STALE.get(locale, STALE['en'])})"
        text = result.document.index.line(line)
        hints.append(
            types.InlayHint(
                position=types.Position(line, units_of(text, result.encoding)),
                label=label,
                padding_left=True,
                tooltip=hint_tooltip(row),
            )
        )
    return hints


def hint_label(row: LineRow) -> str:
    parts: list[str] = []
    if row.output_shape is not None:
        parts.append(f"→ {probe_format.shape(row.output_shape)}")
    time_share = probe_format.share(row.share)
    if time_share is not None:
        parts.append(time_share)
    if row.net_alloc_bytes > 0:
        parts.append(probe_format.size(row.net_alloc_bytes))
    return " · ".join(parts) or probe_format.milliseconds(row.self_ms)


def hint_tooltip(row: LineRow) -> str:
    lines = [
        f"forward {probe_format.milliseconds(row.forward_ms)}, "
        f"backward {probe_format.milliseconds(row.backward_ms)} (profiled step)",
        f"{row.calls} torch call(s); {probe_format.size(row.net_alloc_bytes)} still allocated "
        "after the line (outputs and what autograd saved)",
    ]
    if row.device_ms is not None:
        lines.append(f"device {probe_format.milliseconds(row.device_ms)}")
    return "\n".join(lines)
