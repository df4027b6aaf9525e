"""`torchdoctor probe FILE::Class`: run a model in a separate torch process and print a report.

Exit status: 0 the probe ran and found nothing, 1 it ran and has runtime findings, 2 it could
not run (bad arguments, broken model code, time-out).
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

from rich.console import Console, Group
from rich.panel import Panel
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from . import client, distributed_cli, shapes_cli, units
from .build_arguments import add_build_arguments, build_options_from_arguments
from .build_summary import build_rows, input_text
from .client import DEVICES, ProbeArgumentError, ProbeLimits, ProbeOptions
from .schema import ErrorEvent, FinalEvent, ProbeEvent, ProbeReport, ProgressEvent, ResultEvent
from .termination import StoppedBySignal, cancelled_by_signals

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
MODULE_ROWS = 40
MODULE_DEPTH = 3


def add_probe_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "probe",
        help="run a model in a torch subprocess and report shapes, time, memory and FLOPs",
        description=(
            "Import FILE in the chosen interpreter, build CLASS, run it on an example input "
            "and report per-module shapes, latency, peak memory, FLOPs, hot source lines, "
            "runtime findings and a DDP/FSDP recommendation."
        ),
    )
    parser.add_argument(
        "target", metavar="FILE::CLASS", help="the model, e.g. examples/models.py::SmallCNN"
    )
    parser.add_argument(
        "--input", dest="input_spec", metavar="SPEC",
        help='example input: "(8, 3, 224, 224)", "(8, 128):int64[0,50257)", '
        '"(8, 16); (8, 16):bool", "input_ids=(4, 128):int64, attention_mask=(4, 128):bool", '
        "tuples, lists and dicts of these; dtypes by torch name or bf16, fp16, half, long",
    )
    add_build_arguments(parser)
    parser.add_argument("--device", choices=DEVICES, default="auto", help="default: auto")
    parser.add_argument(
        "--iters", type=int, default=10, help="timed iterations per measurement (default: 10)"
    )
    parser.add_argument("--json", action="store_true", help="print the final event as JSON")
    parser.add_argument(
        "--python", default=sys.executable, metavar="PATH",
        help="interpreter with the model's torch (default: this one)",
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, metavar="S", help="give up after S seconds"
    )
    parser.add_argument("--threads", type=int, help="torch CPU threads in the probe")
    parser.add_argument(
        "--explain", action="store_true", help="also look for torch.compile graph breaks (slow)"
    )
    parser.add_argument(
        "--memory-limit", type=int, metavar="MIB",
        help="cap the probe's address space (CPU only: CUDA reserves far more than it uses)",
    )
    distributed_cli.add_distributed_arguments(parser)
    shapes_cli.add_shapes_arguments(parser)


def run_probe(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    try:
        options = options_from_arguments(args)
        limits = ProbeLimits(
            timeout_s=args.timeout,
            memory_limit_bytes=args.memory_limit * 1024 * 1024 if args.memory_limit else None,
        )
        final = asyncio.run(
            cancelled_by_signals(probe_with_progress(args.python, options, limits, err))
        )
        final, distributed = distributed_cli.probe_across_ranks(args, options, limits, final, err)
    except ProbeArgumentError as exc:
        err.print(f"[bold red]torchdoctor probe:[/] {escape(str(exc))}")
        return EXIT_ERROR
    except StoppedBySignal as stopped:  # the runner's process group is gone by now
        err.print(f"torchdoctor probe: {stopped}; the probe was stopped")
        return stopped.exit_code
    if args.json:
        print(json.dumps(distributed_cli.event_json_with(event_json(final), distributed), indent=2))
    else:
        out = Console()
        if isinstance(final, ResultEvent):
            print_report(out, final.report)
            shapes_cli.print_shapes_sections(out, final.report, args)
        else:
            print_error(out, final)
        distributed_cli.print_section(out, distributed)
    if distributed is not None:
        return distributed_cli.exit_status(final, distributed)
    if isinstance(final, ErrorEvent):
        return EXIT_ERROR
    return EXIT_FINDINGS if final.report.findings else EXIT_OK


def options_from_arguments(args: argparse.Namespace) -> ProbeOptions:
    file, _, target = args.target.rpartition("::")
    if not file:
        file, target = args.target, only_module_class(args.target)
    if args.timeout <= 0:
        raise ProbeArgumentError("--timeout must be positive")
    if args.memory_limit is not None and args.memory_limit <= 0:
        raise ProbeArgumentError("--memory-limit must be positive")
    return ProbeOptions(
        file=file,
        target=target,
        build=build_options_from_arguments(args),
        input_spec=args.input_spec,
        device=args.device,
        iters=args.iters,
        threads=args.threads,
        explain=args.explain,
        sweep=shapes_cli.sweep_options_from_arguments(args),
    ).validated()


def only_module_class(path: str) -> str:
    """The target when FILE has a single nn.Module subclass and no ::Class was given."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        raise ProbeArgumentError(f"write FILE::CLASS ({path}: {exc})") from None
    classes = [
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        and any(ast.unparse(base).split(".")[-1] == "Module" for base in node.bases)
    ]
    if len(classes) == 1:
        return classes[0]
    listed = ", ".join(f"{path}::{name}" for name in classes) or "none found"
    raise ProbeArgumentError(f"write FILE::CLASS to say which model to probe ({listed})")


async def probe_with_progress(
    python: str, options: ProbeOptions, limits: ProbeLimits, err: Console
) -> FinalEvent:
    if not err.is_terminal:
        return await run_probe_events(python, options, limits, None)
    columns = (
        TextColumn("[bold]probe[/]"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
    )
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task("starting the runner", total=100)

        def show(event: ProbeEvent) -> None:
            if isinstance(event, ProgressEvent):
                progress.update(task, completed=event.percent, description=event.message)

        return await run_probe_events(python, options, limits, show)


async def run_probe_events(
    python: str, options: ProbeOptions, limits: ProbeLimits, on_event: Any
) -> FinalEvent:
    return await client.run_probe(python, options, limits=limits, on_event=on_event)


def event_json(final: FinalEvent) -> dict[str, Any]:
    if isinstance(final, ResultEvent):
        return {"event": "result", "report": final.report.to_dict()}
    return {"event": "error", **asdict(final)}


# --------------------------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------------------------


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)


# The CLI prints measurements as the editor does (probe/units.py); "-" where none was taken.
def fmt_bytes(value: float | None) -> str:
    return "-" if value is None else units.size(value)


def fmt_count(value: float | None) -> str:
    return "-" if value is None else units.count(value)


def fmt_flops(value: float | None) -> str:
    return "-" if value is None else units.flops(value)


def fmt_ms(value: float | None) -> str:
    return "-" if value is None else units.milliseconds(value)


def fmt_share(value: float | None) -> str:
    return "-" if value is None else units.percent(value)


def where(file: str | None, line: int | None) -> str:
    if not file:
        return "-"
    try:
        shown = os.path.relpath(file)
        if shown.startswith(".."):
            shown = file
    except ValueError:
        shown = file
    return f"{shown}:{line}" if line else shown


def shape_text(shapes: list[list[int]] | None) -> str:
    """Shapes as torch's tuples, `(8, 3, 32, 32)`; past three outputs, the rest as "...", to
    keep the table's column narrow."""
    if not shapes:
        return "-"
    text = units.shapes(shapes[:3])
    return text + (", ..." if len(shapes) > 3 else "")


def line_in(report: ProbeReport, file: str | None, line: int | None) -> str:
    """Just the line number inside the probed file; file:line elsewhere."""
    if file == report.file and line:
        return str(line)
    return where(file, line)


def summary_table(report: ProbeReport) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    device = report.device
    table.add_row("torch", f"{report.torch_version} (Python {report.python_version})")
    table.add_row("device", f"{device.kind}: {device.name}, {device.threads} thread(s)")
    source = report.input
    table.add_row("input", f"{escape(input_text(report))}  [dim]{escape(source.detail)}[/]")
    for label, text in build_rows(report):
        table.add_row(label, escape(text))
    params = report.params
    table.add_row(
        "parameters",
        f"{params.trainable:,} trainable / {params.total:,} total, "
        f"{fmt_bytes(params.parameter_bytes)} + {fmt_bytes(params.buffer_bytes)} buffers",
    )
    latency = report.latency
    forward = latency.forward
    table.add_row(
        "forward",
        f"{fmt_ms(forward.median_ms)} median (IQR {fmt_ms(forward.iqr_ms)}, "
        f"n={forward.iterations}, {latency.method})",
    )
    both = latency.forward_backward
    if both is not None:
        table.add_row(
            "forward+backward",
            f"{fmt_ms(both.median_ms)} median (IQR {fmt_ms(both.iqr_ms)}, n={both.iterations})",
        )
    memory = report.memory
    table.add_row(
        "peak memory",
        f"{fmt_bytes(memory.peak_bytes)} ({fmt_bytes(memory.activation_bytes)} for the step "
        f"on top of {fmt_bytes(memory.baseline_bytes)}; {memory.method})",
    )
    flops = report.flops
    rate = ""
    if both is not None and flops.forward_backward and both.median_ms > 0:
        rate = f", {fmt_flops(flops.forward_backward / both.median_ms * 1000)}/s achieved"
    table.add_row(
        "FLOPs",
        f"{fmt_flops(flops.forward)} forward, {fmt_flops(flops.forward_backward)} "
        f"forward+backward{rate}",
    )
    return table


def modules_table(report: ProbeReport) -> Table:
    table = Table(title="Modules", title_justify="left", expand=False)
    shown = [row for row in report.modules if row.depth <= MODULE_DEPTH][:MODULE_ROWS]
    rows = []
    for row in shown:
        label = "  " * row.depth + (row.name.rsplit(".", 1)[-1] if row.name else report.target)
        rows.append(
            (
                escape(label),
                row.type,
                shape_text(row.output_shapes),
                f"{row.params:,}",
                fmt_ms(row.forward_ms),
                fmt_count(row.flops),
                line_in(report, row.file, row.line),
            )
        )

    def width(column: int, header: str) -> int:
        return max([len(header), *(len(cells[column]) for cells in rows)])

    # On a narrow terminal the names and types give way; a shape or a figure is never cut short.
    table.add_column("module", overflow="fold")
    table.add_column("type", overflow="fold")
    for column, header in enumerate(
        ("output shape", "params", "forward", "FLOPs", "line"), start=2
    ):
        justify: Literal["left", "right"] = "left" if column == 2 else "right"
        table.add_column(header, justify=justify, no_wrap=True, min_width=width(column, header))
    for cells in rows:
        table.add_row(*cells)
    hidden = len(report.modules) - min(len(shown), MODULE_ROWS)
    if hidden > 0:
        table.caption = f"{hidden} deeper or further modules not shown (--json has them all)"
    return table


def ops_table(report: ProbeReport) -> Table:
    device = report.device.kind == "cuda"
    table = Table(title="Top operators (one profiled step)", title_justify="left")
    table.add_column("operator")
    table.add_column("calls", justify="right")
    table.add_column("self (GPU)" if device else "self", justify="right")
    table.add_column("share", justify="right")
    for op in report.top_ops[:10]:
        spent = op.self_device_ms if device else op.self_ms
        table.add_row(escape(op.name), str(op.calls), fmt_ms(spent), fmt_share(op.share))
    return table


def lines_table(report: ProbeReport) -> Table:
    table = Table(
        title="Hot lines (profiled step, by self time)", title_justify="left", expand=True
    )
    table.add_column("line", justify="right")
    table.add_column("code", overflow="ellipsis", no_wrap=True, ratio=1)
    table.add_column("forward", justify="right", no_wrap=True)
    table.add_column("backward", justify="right", no_wrap=True)
    table.add_column("share", justify="right")
    table.add_column("shape", no_wrap=True)
    for row in report.hot_lines(10):
        table.add_row(
            line_in(report, row.file, row.line),
            escape(row.code),
            fmt_ms(row.forward_ms),
            fmt_ms(row.backward_ms),
            fmt_share(row.share),
            shape_text([row.output_shape]) if row.output_shape is not None else "-",
        )
    return table


SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "information": "cyan"}


def findings_table(report: ProbeReport) -> Table:
    table = Table(title="Runtime findings", title_justify="left")
    table.add_column("severity")
    table.add_column("where")
    table.add_column("finding")
    for finding in report.findings:
        style = SEVERITY_STYLE.get(finding.severity, "")
        repeated = finding.count > 1 and finding.kind != "unused_parameter"  # names listed
        count = f" (x{finding.count})" if repeated else ""
        table.add_row(
            Text(finding.severity, style=style),
            line_in(report, finding.file, finding.line),
            escape(finding.message) + count,
        )
    return table


def recommendation_panel(report: ProbeReport) -> Panel:
    advice = report.recommendation
    names = {
        "ddp": "DistributedDataParallel",
        "fsdp_shard_grad_op": "FSDP, sharding gradients and optimizer state (SHARD_GRAD_OP)",
        "fsdp_full_shard": "FSDP, full sharding (FULL_SHARD / fully_shard)",
    }
    body = Text.assemble(
        (names.get(advice.strategy, advice.strategy), "bold"), "\n", advice.reason
    )
    return Panel(body, title="Multi-GPU training", title_align="left", expand=False)


def print_report(console: Console, report: ProbeReport) -> None:
    title = f"{report.target}  [dim]{escape(where(report.file, None))}[/]"
    console.print(Panel(summary_table(report), title=title, title_align="left", expand=False))
    console.print(modules_table(report))
    if report.top_ops:
        console.print(ops_table(report))
    if report.lines:
        console.print(lines_table(report))
    if report.findings:
        console.print(findings_table(report))
    else:
        console.print("[green]No runtime findings.[/]")
    breaks = report.graph_breaks
    if breaks is not None:
        if breaks.error:
            console.print(f"[yellow]torch._dynamo.explain failed:[/] {escape(breaks.error)}")
        else:
            console.print(
                f"torch.compile: {breaks.graph_count} graph(s), "
                f"{breaks.graph_break_count} break(s)"
            )
            for item in breaks.breaks:
                console.print(f"  {where(item.file, item.line)}: {escape(item.reason)}")
    console.print(recommendation_panel(report))
    for warning in report.warnings:
        console.print(f"[yellow]note:[/] {escape(warning)}")


# report sections an error event's `partial` may carry (pass_outcomes.py in the runner)
PARTIAL_SECTIONS = ("params", "modules", "findings", "flops", "latency", "memory")


def print_error(console: Console, error: ErrorEvent) -> None:
    console.print(f"[bold red]probe failed ({error.kind}):[/] {escape(error.message)}")
    if error.failed_pass:
        measured = [key for key in (error.partial or {}) if key in PARTIAL_SECTIONS]
        kept = ", ".join(measured) or "nothing"
        console.print(f"  in the {error.failed_pass} pass; measured before it: {escape(kept)}")
    if error.file:
        console.print(f"  at {where(error.file, error.line)}")
        source = source_line(error.file, error.line)
        if source:
            console.print(f"  [dim]{error.line:>5} |[/] {escape(source)}")
    if error.kind in ("exited", "internal") and error.stderr_tail:
        tail = "\n".join(error.stderr_tail.strip().splitlines()[-12:])
        console.print(Panel(escape(tail), title="runner stderr (end)", title_align="left"))
    elif error.traceback and error.kind not in ("syntax", "usage", "target", "input"):
        tail = "\n".join(error.traceback.strip().splitlines()[-8:])
        console.print(Group(Text("traceback (end):", style="dim"), Text(tail, style="dim")))


def source_line(file: str, line: int | None) -> str | None:
    if not line:
        return None
    try:
        lines = Path(file).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return lines[line - 1].rstrip() if 0 < line <= len(lines) else None
