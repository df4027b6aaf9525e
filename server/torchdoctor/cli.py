"""`torchdoctor check|explain|rules|serve|probe`: a thin shell over the analysis engine."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from . import __version__
from .analysis import REGISTRY
from .analysis.config import ConfigError
from .docs import doc_page
from .reporting.interrupts import Terminated, sigterm_raises

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchdoctor",
        description="Find PyTorch pitfalls in Python code, and probe models on the local GPU.",
    )
    parser.add_argument("--version", action="version", version=f"torchdoctor {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = commands.add_parser("check", help="check files or folders for PyTorch pitfalls")
    check.add_argument("paths", nargs="*", type=Path, help="files or folders (default: .)")
    check.add_argument(
        "--format",
        choices=("text", "json", "sarif", "github"),
        default="text",
        help="output format (default: text)",
    )
    check.add_argument("--fix", action="store_true", help="apply the fixes and report them")
    check.add_argument(
        "--diff", action="store_true", help="show the fixes as a diff, write nothing"
    )
    check.add_argument(
        "--unsafe-fixes",
        action="store_true",
        help="also apply fixes that change behaviour on purpose (e.g. use_reentrant=False)",
    )
    check.add_argument("--select", type=_code_list, help="comma-separated codes or prefixes, ALL")
    check.add_argument("--extend-select", type=_code_list, help="codes enabled on top of select")
    check.add_argument("--ignore", type=_code_list, help="comma-separated codes or prefixes")
    check.add_argument(
        "--stdin-filename", help="read the source from stdin, reporting it under this path"
    )
    check.add_argument(
        "--jobs", "-j", type=int, default=0, help="worker processes (default: all cores)"
    )
    check.add_argument(
        "--python",
        metavar="PATH",
        help="interpreter whose installed torch decides version-dependent rules when the "
        "configuration sets no target-torch (default: this Python)",
    )
    check.add_argument("--no-color", action="store_true", help="plain text output")
    check.add_argument("--quiet", "-q", action="store_true", help="findings only, no summary")

    explain = commands.add_parser("explain", help="print a rule's documentation")
    explain.add_argument("code", help="a rule code such as TD101")
    explain.add_argument("--lang", default="en", help="en or zh-CN")

    commands.add_parser("rules", help="list every rule").add_argument(
        "--format", choices=("text", "json"), default="text"
    )

    _add_serve_arguments(commands.add_parser("serve", help=SERVE_HELP))

    try:
        from .probe.command import add_probe_parser
    except ImportError:  # the probe ships with the package; guard against a broken install
        pass
    else:
        add_probe_parser(commands)
        from .probe.diff_command import add_probe_diff_parser

        add_probe_diff_parser(commands)
    return parser


SERVE_HELP = "run the language server (stdio)"


def _add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead, for debugging")
    serve.add_argument("--log-file", type=Path, help="write the server log to this file")


def _serve(args: argparse.Namespace) -> int:
    from .lsp.launch import serve

    return serve(tcp=args.tcp, log_file=args.log_file)


def _code_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["serve"]:
        # the editor waits for the server's first answers: parse without importing the other
        # commands (the probe's pull in rich and asyncio, a fifth of a second)
        serve = argparse.ArgumentParser(prog="torchdoctor serve", description=SERVE_HELP)
        _add_serve_arguments(serve)
        try:
            return _serve(serve.parse_args(arguments[1:]))
        except KeyboardInterrupt:
            return 130
    parser = build_parser()
    args = parser.parse_args(arguments)
    try:
        if args.command == "check":
            from .reporting import checking

            with sigterm_raises():
                return checking.run_check(args)
        if args.command == "explain":
            return _explain(args.code, args.lang)
        if args.command == "rules":
            return _rules(args.format)
        if args.command == "serve":
            return _serve(args)
        if args.command == "probe":
            from .probe.command import run_probe

            return run_probe(args)
        if args.command == "probe-diff":
            from .probe.diff_command import run_probe_diff

            return run_probe_diff(args)
    except ConfigError as error:
        print(f"torchdoctor: configuration error:\n{error}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return _interrupted(args, 130)
    except Terminated:
        return _interrupted(args, Terminated.exit_code)
    parser.print_help()
    return EXIT_ERROR


def _interrupted(args: argparse.Namespace, exit_code: int) -> int:
    """`check`'s workers are gone by now (see reporting/workers.py): say what state files are in."""
    if args.command == "check":
        state = (
            "; the files fixed so far keep their fixes, no other file was changed"
            if args.fix
            else ""
        )
        print(f"torchdoctor: interrupted{state}", file=sys.stderr)
    return exit_code


def _explain(code: str, locale: str) -> int:
    code = code.strip().upper()
    if REGISTRY.get(code) is None:
        print(f"torchdoctor: no rule {code} (see `torchdoctor rules`)", file=sys.stderr)
        return EXIT_ERROR
    page = doc_page(code, locale)
    if page is None:
        print(f"torchdoctor: {code} has no documentation page", file=sys.stderr)
        return EXIT_ERROR
    sys.stdout.write(page if page.endswith("\n") else page + "\n")
    return EXIT_CLEAN


def _rules(output_format: str) -> int:
    infos = list(REGISTRY)
    if output_format == "json":
        import json

        rows = [
            {
                "code": info.code,
                "name": info.name,
                "severity": info.severity.value,
                "fixable": info.fixable,
                "enabled_by_default": info.enabled_by_default,
                "summary": info.summary,
            }
            for info in infos
        ]
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return EXIT_CLEAN
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for column in ("code", "name", "severity", "fix", "default", "summary"):
        table.add_column(column, overflow="fold")
    for info in infos:
        table.add_row(
            info.code,
            info.name,
            info.severity.value,
            "yes" if info.fixable else "",
            "on" if info.enabled_by_default else "off",
            info.summary,
        )
    Console(highlight=False).print(table)
    return EXIT_CLEAN


if __name__ == "__main__":
    raise SystemExit(main())
