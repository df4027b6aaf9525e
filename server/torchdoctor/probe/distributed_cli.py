"""`torchdoctor probe --nproc N`: the distributed probe's flags, its run and its tables.

command.py calls in here at four points (arguments, run, output, exit status); all that is
distributed lives in this module.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .client import ProbeArgumentError, ProbeLimits, ProbeOptions
from .distributed import BACKEND_CHOICES, DistributedOptions, run_distributed_probe
from .distributed_schema import DISTRIBUTED_SCHEMA_VERSION, DistributedInfo, StrategyResult
from .distributed_summary import fmt_gib, fmt_share
from .schema import FinalEvent, ResultEvent

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def add_distributed_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "distributed (torchrun)",
        "also run the model on N local ranks under torch.distributed.run and measure DDP "
        "and FSDP2 (fully_shard) side by side",
    )
    group.add_argument(
        "--nproc", type=int, metavar="N", help="ranks to launch on this machine (e.g. 2)"
    )
    group.add_argument(
        "--strategy", choices=("ddp", "fsdp", "both"), default="both", help="default: both"
    )
    group.add_argument(
        "--backend", choices=BACKEND_CHOICES, default="auto",
        help="default: auto (nccl with one GPU per rank, else gloo on CPU)",
    )
    group.add_argument(
        "--collective-timeout", type=float, default=60.0, metavar="S",
        help="process-group time-out: a collective waiting longer fails (default: 60)",
    )


def distributed_options(args: argparse.Namespace, options: ProbeOptions) -> DistributedOptions:
    if args.collective_timeout <= 0:
        raise ProbeArgumentError("--collective-timeout must be positive")
    return DistributedOptions(
        file=options.file,
        target=options.target,
        nproc=args.nproc,
        strategy=args.strategy,
        backend=args.backend,
        input_spec=options.input_spec,
        iters=min(options.iters, 20),
        threads=options.threads,
        collective_timeout_s=args.collective_timeout,
        origin=options.origin,
    ).validated()


def probe_across_ranks(
    args: argparse.Namespace,
    options: ProbeOptions,
    limits: ProbeLimits,
    final: FinalEvent,
    err: Console,
) -> tuple[FinalEvent, DistributedInfo | None]:
    """With --nproc: run the distributed probe after the single-process one and attach its
    section to the report. A model that needs a process group (it calls dist.* in forward)
    fails the single-process probe and is still measured here."""
    if getattr(args, "nproc", None) is None:
        return final, None
    distributed = distributed_options(args, options)
    if err.is_terminal:
        err.print(f"[bold]probe[/] launching {distributed.nproc} rank(s) under torchrun...")
    info = asyncio.run(run_distributed_probe(args.python, distributed, limits=limits))
    return attach(final, info), info


def attach(final: FinalEvent, info: DistributedInfo) -> FinalEvent:
    """The report with its `distributed` section (schema 2); its recommendation now quotes
    the measurement."""
    if not isinstance(final, ResultEvent):
        return final
    report = final.report
    advice = report.recommendation
    if info.recommendation is not None:
        advice = dataclasses.replace(
            advice, reason=f"{info.recommendation.reason}. Single process: {advice.reason}"
        )
    report = dataclasses.replace(
        report, schema=DISTRIBUTED_SCHEMA_VERSION, distributed=info, recommendation=advice
    )
    return ResultEvent(report)


def event_json_with(payload: dict[str, Any], info: DistributedInfo | None) -> dict[str, Any]:
    """An error event keeps the distributed section beside it (a result holds it already)."""
    if info is not None and payload.get("event") == "error":
        payload = {**payload, "distributed": dataclasses.asdict(info)}
    return payload


def exit_status(final: FinalEvent, info: DistributedInfo) -> int:
    measured = any(result.ok for result in info.strategies)
    findings = bool(info.findings) or (
        isinstance(final, ResultEvent) and bool(final.report.findings)
    )
    if findings:
        return EXIT_FINDINGS
    return EXIT_OK if measured else EXIT_ERROR


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


def _bytes(value: int | None) -> str:
    return fmt_gib(value) if value is not None else "-"


def comparison_table(info: DistributedInfo) -> Table:
    """The strategies side by side; per-rank figures are the highest rank's."""
    table = Table(
        title=f"Distributed: {info.nproc} rank(s) x {info.nnodes} node(s), {info.backend}",
        title_justify="left",
    )
    table.add_column("per rank")
    results: list[StrategyResult] = info.strategies
    for result in results:
        status = "" if result.ok else " (incomplete)"
        table.add_column(result.strategy.upper() + status, justify="right")

    def row(label: str, values: list[str]) -> None:
        table.add_row(label, *values)

    row("step (slowest rank, median)", [_ms(r.step_ms) for r in results])
    row("communication share", [fmt_share(r.comm_share) for r in results])
    kinds = sorted({c.kind for r in results for rank in r.ranks for c in rank.collectives})
    for kind in kinds:
        row(f"  {kind} per step", [_collective_ms(r, kind) for r in results])
    row("bytes communicated / step", [_bytes(r.bytes_per_step) for r in results])
    row("peak memory", [_bytes(r.peak_memory_bytes) for r in results])
    row("parameters", [_bytes(r.param_bytes) for r in results])
    row("gradients", [_bytes(r.grad_bytes) for r in results])
    row("optimizer state", [_bytes(r.optimizer_state_bytes) for r in results])
    return table


def _collective_ms(result: StrategyResult, kind: str) -> str:
    times = [c.ms for rank in result.ranks for c in rank.collectives if c.kind == kind]
    return _ms(max(times)) if times else "-"


def ranks_table(info: DistributedInfo) -> Table | None:
    troubled = [status for status in info.ranks if status.status != "ok"]
    if not troubled:
        return None
    table = Table(title="Ranks that did not finish", title_justify="left")
    table.add_column("rank", justify="right")
    table.add_column("status")
    table.add_column("where (user's lines, innermost first)")
    table.add_column("message", overflow="fold")
    for status in troubled:
        frames = " <- ".join(
            f"{os.path.basename(f.file)}:{f.line} {f.function}" for f in status.stack[:4]
        ) or "-"
        table.add_row(str(status.rank), status.status, frames, status.message or "-")
    return table


def estimates_table(info: DistributedInfo) -> Table | None:
    advice = info.recommendation
    if advice is None or not advice.estimates:
        return None
    table = Table(title="Estimate (extrapolated, not measured)", title_justify="left")
    for header in ("ranks", "nodes", "strategy", "memory / rank", "comm share"):
        table.add_column(header, justify="right")
    for row in advice.estimates:
        table.add_row(
            str(row.ranks), str(row.nodes), row.strategy.upper(),
            fmt_gib(row.memory_per_rank_bytes), fmt_share(row.comm_share),
        )
    table.caption = advice.formula
    return table


def print_section(console: Console, info: DistributedInfo | None) -> None:
    if info is None:
        return
    from rich.markup import escape

    if info.strategies:
        console.print(comparison_table(info))
    for result in info.strategies:
        for difference in result.differences:
            console.print(f"[yellow]{result.strategy.upper()}:[/] {escape(difference)}")
    troubled = ranks_table(info)
    if troubled is not None:
        console.print(troubled)
    for finding in info.findings:
        where = f"{os.path.relpath(finding.file)}:{finding.line}" if finding.file else "-"
        code = f"{finding.code} " if finding.code else ""
        style = "bold red" if finding.severity == "error" else "yellow"
        console.print(Text.assemble((f"{code}{finding.severity}", style), f" {where}: "), end="")
        console.print(escape(finding.message))
        if finding.kind == "collective_divergence":
            for line in finding.detail.splitlines():
                console.print(f"    {escape(line)}")
    if info.recommendation is not None:
        advice = info.recommendation
        body = Text.assemble((advice.strategy.upper(), "bold"), "\n", advice.reason)
        console.print(Panel(body, title="Measured DDP/FSDP", title_align="left", expand=False))
        estimates = estimates_table(info)
        if estimates is not None:
            console.print(estimates)
    if info.error:
        console.print(f"[bold red]distributed probe:[/] {escape(info.error)}")
    for warning in info.warnings:
        console.print(f"[yellow]note:[/] {escape(warning)}")
