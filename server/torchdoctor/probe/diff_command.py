"""`torchdoctor probe-diff OLD.json NEW.json`: what changed between two saved probe reports
(`torchdoctor probe ... --json > report.json`), for CI.

Exit status: 0 no threshold passed, 1 a threshold given (`--max-slowdown`, `--max-memory-growth`)
was passed, 2 a file could not be read.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .report_diff import ReportDiff, Thresholds, diff_reports
from .schema import ProbeReport, SchemaError

EXIT_OK, EXIT_THRESHOLD, EXIT_ERROR = 0, 1, 2


class ReportFileError(Exception):
    pass


def add_probe_diff_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "probe-diff",
        help="compare two saved probe reports; exit 1 when a threshold is passed",
        description="Compare two reports saved with `torchdoctor probe ... --json`: per module "
        "(parameters, output shapes, forward time, FLOPs) and overall (latency, peak memory).",
    )
    parser.add_argument("old", type=Path, help="the earlier report (JSON)")
    parser.add_argument("new", type=Path, help="the later report (JSON)")
    parser.add_argument(
        "--max-slowdown", type=float, metavar="RATIO",
        help="exit 1 when forward+backward (else forward) median grew past RATIO, e.g. 1.1",
    )
    parser.add_argument(
        "--max-memory-growth", type=float, metavar="RATIO",
        help="exit 1 when the peak memory grew past RATIO, e.g. 1.2",
    )
    parser.add_argument("--json", action="store_true", help="print the diff as JSON")


def load_report(path: Path) -> ProbeReport:
    """A report from `probe --json` output (the result event) or a bare report object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportFileError(f"{path}: {exc}") from None
    if isinstance(data, dict) and data.get("event") == "error":
        raise ReportFileError(f"{path}: the probe failed ({data.get('message', '')})")
    if isinstance(data, dict) and isinstance(data.get("report"), dict):
        data = data["report"]
    try:
        return ProbeReport.from_dict(data)
    except SchemaError as exc:
        raise ReportFileError(f"{path}: not a probe report: {exc}") from None


def run_probe_diff(args: argparse.Namespace) -> int:
    err = Console(stderr=True, soft_wrap=True)  # a path is never broken across lines
    for name in ("max_slowdown", "max_memory_growth"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            err.print(f"torchdoctor probe-diff: --{name.replace('_', '-')} must be positive")
            return EXIT_ERROR
    try:
        old, new = load_report(args.old), load_report(args.new)
    except ReportFileError as exc:
        err.print(f"[bold red]torchdoctor probe-diff:[/] {escape(str(exc))}")
        return EXIT_ERROR
    diff = diff_reports(old, new, Thresholds(args.max_slowdown, args.max_memory_growth))
    if args.json:
        print(json.dumps(asdict(diff), indent=2))
    else:
        print_diff(Console(), diff)
    return EXIT_THRESHOLD if diff.failures else EXIT_OK


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} ms"


def _shapes(value: list[list[int]] | None) -> str:
    if not value:
        return "-"
    return ", ".join("x".join(map(str, shape)) or "scalar" for shape in value[:3])


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def print_diff(console: Console, diff: ReportDiff) -> None:
    old_target, new_target = diff.target
    title = old_target if old_target == new_target else f"{old_target} → {new_target}"
    overall = Table(title=f"{escape(title)}: old → new", title_justify="left")
    for header in ("", "old", "new", "ratio"):
        overall.add_column(header, justify="left" if not header else "right")
    for item in diff.overall:
        if item.what in ("forward", "forward+backward"):
            old, new = _ms(item.old), _ms(item.new)
        else:
            old, new = _count(item.old), _count(item.new)
        ratio = f"{item.ratio:.2f}x" if item.ratio is not None else "-"
        overall.add_row(item.what, old, new, ratio)
    console.print(overall)
    if diff.modules:
        table = Table(title="Modules that changed", title_justify="left")
        for header in ("module", "type", "params", "output shape", "forward", "FLOPs"):
            table.add_column(header)
        for change in diff.modules:
            marker = {"added": "+ ", "removed": "- "}.get(change.status, "")
            table.add_row(
                escape(marker + (change.name or "(model)")),
                escape(change.type),
                _pair(change.params, _count),
                _pair(change.output_shapes, _shapes),
                _pair(change.forward_ms, _ms),
                _pair(change.flops, _count),
            )
        console.print(table)
    else:
        console.print("No module changed its parameters, shapes, FLOPs or time.")
    for failure in diff.failures:
        console.print(f"[bold red]threshold passed:[/] {escape(failure)}")


def _pair(values: tuple[Any, Any], show: Any) -> str:
    old, new = values
    return show(old) if old == new else f"{show(old)} → {show(new)}"
