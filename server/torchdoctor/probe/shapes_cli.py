"""`torchdoctor probe` options of the shapes-by-line pass and the batch-size sweep: `--lines`
prints the annotated listing, `--batch-sweep [SIZES]` with `--max-memory MIB` the sweep."""

from __future__ import annotations

import argparse
import os
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .annotated_listing import listings, render
from .client import ProbeArgumentError
from .schema import ProbeReport
from .sweep_options import SweepOptionError, SweepOptions

MIB = 1024 * 1024


def add_shapes_arguments(parser: Any) -> None:
    parser.add_argument(
        "--lines", action="store_true",
        help="print forward's source (and the functions it runs) with every line's shapes",
    )
    parser.add_argument(
        "--batch-sweep", nargs="?", const="auto", default=None, metavar="SIZES",
        help="forward+backward at doubling batch sizes (or SIZES such as 1,8,32) until memory "
        "or time runs out; reports latency, samples/s, peak memory and the largest batch that fits",
    )
    parser.add_argument(
        "--max-memory", type=float, metavar="MIB",
        help="with --batch-sweep: the memory a batch may peak at (default: the GPU's memory)",
    )


def sweep_options_from_arguments(args: argparse.Namespace) -> SweepOptions:
    cap = None
    if args.max_memory is not None:
        if args.max_memory <= 0:
            raise ProbeArgumentError("--max-memory must be positive")
        cap = int(args.max_memory * MIB)
    try:
        return SweepOptions(args.batch_sweep, cap).validated()
    except SweepOptionError as exc:
        raise ProbeArgumentError(str(exc)) from None


def shown_path(file: str) -> str:
    try:
        relative = os.path.relpath(file)
    except ValueError:
        return file
    return file if relative.startswith("..") else relative


def print_listing(console: Console, report: ProbeReport) -> None:
    found = listings(report)
    if not found:
        console.print("[yellow]no shapes by line in this report[/]")
        return
    for listing in found:
        for text in render(listing, shown_path(listing.file)):
            console.print(escape(text), highlight=False, soft_wrap=True)
        console.print()
    info = report.line_shapes
    if info is not None:
        console.print(
            f"[dim]traced with {info.method}: {info.line_events} lines run, forward took "
            f"{info.traced_forward_ms:.2f} ms traced (median {report.latency.forward.median_ms:.2f}"
            " ms untraced)[/]"
        )
    if info is not None and info.truncated:
        console.print("[yellow]note:[/] the shapes pass reached its caps; some lines are missing")


def sweep_table(report: ProbeReport) -> Table | None:
    sweep = report.batch_sweep
    if sweep is None:
        return None
    table = Table(title="Batch-size sweep (forward+backward)", title_justify="left")
    for header in ("batch", "fits", "latency", "samples/s", "peak memory", "note"):
        table.add_column(header, justify="left" if header in ("fits", "note") else "right")
    for point in sorted(sweep.points, key=lambda p: p.batch):
        table.add_row(
            str(point.batch),
            "yes" if point.fits else "no",
            f"{point.latency_ms:.2f} ms" if point.latency_ms is not None else "-",
            f"{point.samples_per_s:,.0f}" if point.samples_per_s is not None else "-",
            f"{point.peak_bytes / MIB:.1f} MiB" if point.peak_bytes is not None else "-",
            point.reason or "",
        )
    cap = sweep.memory_limit_bytes
    limit = f"under {cap / MIB:.1f} MiB" if cap is not None else "without a memory cap"
    table.caption = (
        f"largest batch that fits {limit}: {sweep.largest_fitting_batch or 'none'} "
        f"(stopped by {sweep.stopped_by}, {sweep.seconds:.1f} s)"
    )
    return table


def print_shapes_sections(console: Console, report: ProbeReport, args: argparse.Namespace) -> None:
    table = sweep_table(report)
    if table is not None:
        console.print(table)
    if getattr(args, "lines", False):
        print_listing(console, report)
