"""`torchdoctor check`: run the engine over files (in parallel when there are many), apply or
show fixes, print the results and choose the exit code."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from ..analysis import Config, Document, analyse, load_config
from ..analysis.config import with_overrides
from ..analysis.fixes import apply_fixes
from ..torch_install import installed_torch_version
from .files import discover
from .formats import FileResult, render_github, render_json, render_sarif, render_text_finding
from .source import decode_source

MAX_FIX_PASSES = 8  # a fix can uncover or unblock another; stop when a pass changes nothing
PARALLEL_THRESHOLD = 16  # below this many files, starting workers costs more than it saves


def run_check(args: argparse.Namespace) -> int:
    paths: list[Path] = args.paths or [Path(".")]
    anchor = Path(args.stdin_filename) if args.stdin_filename else paths[0]
    config = load_config(anchor if anchor.exists() else Path.cwd())
    config = with_overrides(
        config, select=args.select, extend_select=args.extend_select, ignore=args.ignore
    )
    if config.target_torch is None:
        # version-dependent rules follow the torch that is installed where the code will run
        config = replace(config, target_torch=installed_torch_version(args.python))
    fix_mode = "fix" if args.fix else "diff" if args.diff else None
    if args.stdin_filename is not None:
        data = sys.stdin.buffer.read()
        result = check_source(data, args.stdin_filename, config, fix_mode, args.unsafe_fixes)
        if args.fix and result.error is None:
            sys.stdout.write(result.fixed_text)  # the fixed source goes to stdout, as in ruff
            return _report([result.file], args, to_stderr=True)
        return _report([result.file], args)
    missing = [str(path) for path in paths if not path.exists()]
    if missing:
        print(f"torchdoctor: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    files = list(discover(paths, config.exclude, config.root))
    results = check_files(files, config, fix_mode, args.unsafe_fixes, args.jobs)
    return _report(results, args)


class SourceResult:
    def __init__(self, file: FileResult, fixed_text: str) -> None:
        self.file = file
        self.fixed_text = fixed_text

    @property
    def error(self) -> str | None:
        return self.file.error


def check_source(
    data: bytes, path: str, config: Config, fix_mode: str | None, unsafe: bool
) -> SourceResult:
    """Analyse one file's bytes; with a fix mode, apply fixes until nothing changes."""
    source = decode_source(data)
    text = source.text
    doc = Document.parse(text, path)
    findings = analyse(doc, config)
    result = FileResult(path, findings, doc.index.lines)
    result.syntax_problems = [(p.line, p.col, p.message) for p in doc.syntax_problems]
    if fix_mode is None or not any(f.fix for f in findings):
        return SourceResult(result, text)
    fixed_text = text
    for _ in range(MAX_FIX_PASSES):
        outcome = apply_fixes(fixed_text, findings, unsafe=unsafe)
        if not outcome.applied or outcome.text == fixed_text:
            break
        result.fixed += len(outcome.applied)
        fixed_text = outcome.text
        doc = Document.parse(fixed_text, path)
        findings = analyse(doc, config)
    if fix_mode == "diff":
        result.diff = "".join(
            difflib.unified_diff(
                text.splitlines(keepends=True),
                fixed_text.splitlines(keepends=True),
                fromfile=f"a/{path}",
                tofile=f"b/{path}",
            )
        )
        return SourceResult(result, fixed_text)
    result.findings = findings
    result.lines = doc.index.lines
    if not source.exact and fixed_text != text:
        result.error = "not valid in its declared encoding; fixes were not written"
        return SourceResult(result, text)
    return SourceResult(result, fixed_text)


def check_path(path: str, config: Config, fix_mode: str | None, unsafe: bool) -> FileResult:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        return FileResult(path, error=f"cannot read: {error.strerror or error}")
    outcome = check_source(data, path, config, fix_mode, unsafe)
    result = outcome.file
    if fix_mode == "fix" and result.error is None and result.fixed:
        encoding = decode_source(data).encoding
        try:
            Path(path).write_bytes(outcome.fixed_text.encode(encoding))
        except (OSError, UnicodeEncodeError) as error:
            result.error = f"cannot write fixes: {error}"
    return result


def check_files(
    files: Sequence[Path], config: Config, fix_mode: str | None, unsafe: bool, jobs: int
) -> list[FileResult]:
    names = [str(path) for path in files]
    workers = jobs if jobs > 0 else (os.cpu_count() or 1)
    if workers <= 1 or len(names) < PARALLEL_THRESHOLD:
        return [check_path(name, config, fix_mode, unsafe) for name in names]
    chunk = max(1, len(names) // (workers * 8))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(
            pool.map(
                check_path,
                names,
                [config] * len(names),
                [fix_mode] * len(names),
                [unsafe] * len(names),
                chunksize=chunk,
            )
        )


def _report(results: list[FileResult], args: argparse.Namespace, to_stderr: bool = False) -> int:
    output = sys.stderr if to_stderr else sys.stdout
    console = Console(
        file=output, highlight=False, no_color=args.no_color, soft_wrap=True, emoji=False
    )
    errors = Console(file=sys.stderr, highlight=False, no_color=args.no_color, soft_wrap=True)
    failed = False
    for result in results:
        if result.error is not None:
            errors.print(f"torchdoctor: {result.path}: {result.error}", markup=False)
            failed = True
    findings = sum(len(result.findings) for result in results)
    if args.diff:
        diffs = [result.diff for result in results if result.diff]
        output.write("".join(diffs))
        if not args.quiet:
            errors.print(f"{len(diffs)} file(s) would be changed", markup=False)
        return 2 if failed else (1 if diffs else 0)
    if args.format == "json":
        output.write(render_json(results) + "\n")
    elif args.format == "sarif":
        output.write(render_sarif(results) + "\n")
    elif args.format == "github":
        text = render_github(results)
        if text:
            output.write(text + "\n")
    else:
        _print_text(console, errors, results, args)
    if failed:
        return 2
    return 1 if findings else 0


def _print_text(
    console: Console, errors: Console, results: list[FileResult], args: argparse.Namespace
) -> None:
    for result in results:
        for line, col, message in result.syntax_problems:
            errors.print(
                f"{result.path}:{line + 1}:{col + 1}: syntax error: {message} "
                "(the rest of the file was checked)",
                markup=False,
            )
        for finding in result.findings:
            console.print(render_text_finding(finding, result))
            console.print()
    if args.quiet:
        return
    count = sum(len(result.findings) for result in results)
    fixable = sum(1 for result in results for f in result.findings if f.fix is not None)
    fixed = sum(result.fixed for result in results)
    checked = len(results)
    if fixed:
        console.print(f"Fixed {fixed} problem{'s' if fixed != 1 else ''}.")
    if count:
        hint = f" ({fixable} fixable with --fix)" if fixable and not args.fix else ""
        console.print(
            f"Found {count} problem{'s' if count != 1 else ''} in "
            f"{checked} file{'s' if checked != 1 else ''}{hint}."
        )
    else:
        console.print(
            f"All checks passed ({checked} file{'s' if checked != 1 else ''} checked).",
            markup=False,
        )
