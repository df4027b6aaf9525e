"""`torchdoctor check`: run the engine over files (in parallel when there are many), apply or
show fixes, print the results and choose the exit code.

Workers only read and analyse; every write happens here, in the parent, in file order: a
signal that stops the parent stops the writing, and each file is replaced atomically."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from rich.console import Console

from ..analysis import Config, Document, Finding, analyse, load_config
from ..analysis.config import with_overrides
from ..analysis.fixes import apply_fixes
from ..analysis.gc_pause import gc_paused
from ..analysis.rule_runner import InternalError, collecting_internal_errors
from ..analysis.rules.syntax.td000_syntax_error import undecodable_source_finding
from ..torch_install import installed_torch_version
from .display import display_path
from .files import FileIdentity, discover, read_source_file
from .fix_writing import write_fixed_file
from .formats import FileResult, render_github, render_json, render_sarif, render_text_finding
from .notebook_checking import check_notebook, is_notebook
from .source import Source, decode_source
from .workers import results_in_order

MAX_FIX_PASSES = 8  # a fix can uncover or unblock another; stop when a pass changes nothing
PARALLEL_THRESHOLD = 16  # below this many files, starting workers costs more than it saves
EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


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
        return _check_stdin(args, config, fix_mode)
    # lexists: a broken link or a link loop is there, and is reported as what it is below
    missing = [display_path(str(path)) for path in paths if not os.path.lexists(path)]
    if missing:
        print(f"torchdoctor: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return EXIT_ERROR
    found = discover(paths, config.exclude, config.root)
    skipped = [FileResult(str(s.path), error=s.reason) for s in found.skipped]
    results = check_files(
        found.files, config, fix_mode, args.unsafe_fixes, args.jobs, roots=found.roots
    )
    return _report(results, args, skipped=skipped)


def _check_stdin(args: argparse.Namespace, config: Config, fix_mode: str | None) -> int:
    """Formatter style with `--fix`: the fixed source on stdout, in the bytes it came in
    (encoding, BOM, line endings), the report on stderr; on any problem nothing on stdout."""
    data = sys.stdin.buffer.read()
    result = check_source(data, args.stdin_filename, config, fix_mode, args.unsafe_fixes)
    if not args.fix:
        return _report([result.file], args)
    output: bytes | None = None
    if not result.source.exact:
        line, column = result.source.bad_position or (0, 0)
        result.file.error = (
            f"stdin is not valid {result.source.encoding} (line {line + 1}, column "
            f"{column + 1}); nothing was printed"
        )
    elif result.error is not None:
        pass  # unreadable as what its name says (a notebook that is not JSON): print nothing
    elif result.fixed_text == result.source.text:
        output = data
    else:
        try:
            output = result.source.encode(result.fixed_text)
        except UnicodeEncodeError as error:
            result.file.error = f"the fixed source cannot be written in {error.encoding}"
    if output is not None:
        sys.stdout.buffer.write(output)
        sys.stdout.buffer.flush()
    return _report([result.file], args, to_stderr=True)


@dataclass
class SourceResult:
    file: FileResult
    fixed_text: str
    source: Source

    @property
    def error(self) -> str | None:
        return self.file.error


def check_source(
    data: bytes, path: str, config: Config, fix_mode: str | None, unsafe: bool
) -> SourceResult:
    """Analyse one file's bytes; with a fix mode, apply fixes until nothing changes."""
    if is_notebook(path):
        return SourceResult(*check_notebook(data, path, config, fix_mode, unsafe))
    # the file's documents are freed before the pause ends (see engine.check)
    with gc_paused():
        return _check_text(data, path, config, fix_mode, unsafe)


def _check_text(
    data: bytes, path: str, config: Config, fix_mode: str | None, unsafe: bool
) -> SourceResult:
    source = decode_source(data)
    text = source.text
    crashes: list[InternalError] = []
    doc = Document.parse(text, path)
    findings = _analysed(doc, config, source, crashes)
    result = FileResult(path, findings, doc.index.lines, internal_errors=crashes)
    if fix_mode is None or not any(f.fix for f in findings):
        return SourceResult(result, text, source)
    fixed_text = text
    for _ in range(MAX_FIX_PASSES):
        outcome = apply_fixes(fixed_text, findings, unsafe=unsafe)
        if not outcome.applied or outcome.text == fixed_text:
            break
        result.fixed += len(outcome.applied)
        fixed_text = outcome.text
        doc = Document.parse(fixed_text, path)
        findings = _analysed(doc, config, source, crashes)
    if fix_mode == "diff":
        shown = display_path(path)
        result.diff = "".join(
            difflib.unified_diff(
                text.splitlines(keepends=True),
                fixed_text.splitlines(keepends=True),
                fromfile=f"a/{shown}",
                tofile=f"b/{shown}",
            )
        )
        return SourceResult(result, fixed_text, source)
    result.findings = findings
    result.lines = doc.index.lines
    if not source.exact and fixed_text != text:
        result.error = "not valid in its declared encoding; fixes were not written"
        return SourceResult(result, text, source)
    return SourceResult(result, fixed_text, source)


def _analysed(
    doc: Document, config: Config, source: Source, crashes: list[InternalError]
) -> list[Finding]:
    """The findings; a rule that crashes is added to `crashes` once, however many fix passes
    meet it, and the other rules' findings still come."""
    with collecting_internal_errors() as records:
        findings = analyse(doc, config)
    doc.drop_derived_facts()  # the next file's analysis need not wait for the collector
    known = {record.code for record in crashes}
    crashes.extend(record for record in records if record.code not in known)
    return _with_decoding_problem(findings, doc, source)


def _with_decoding_problem(findings: list[Finding], doc: Document, source: Source) -> list[Finding]:
    """Python refuses a file whose bytes are not valid in its encoding: that is a TD000 too."""
    if source.bad_position is None:
        return findings
    line, column = source.bad_position
    problem = undecodable_source_finding(doc.index.lines, line, column, source.encoding)
    return sorted([problem, *findings], key=lambda f: (f.span.start_line, f.span.start_col, f.code))


@dataclass
class CheckedFile:
    """What a worker sends back: the report and, when fixes apply, the bytes to write."""

    result: FileResult
    fixed_data: bytes | None = None
    read_as: FileIdentity | None = None


def check_path(path: str, config: Config, fix_mode: str | None, unsafe: bool) -> CheckedFile:
    """Read and analyse one file. Never writes: the parent does (see `write_fixes`)."""
    try:
        data, identity = read_source_file(path)
    except OSError as error:
        return CheckedFile(FileResult(path, error=f"cannot read: {error.strerror or error}"))
    outcome = check_source(data, path, config, fix_mode, unsafe)
    result = outcome.file
    if fix_mode != "fix" or result.error is not None or not result.fixed:
        return CheckedFile(result)
    try:
        fixed_data = outcome.source.encode(outcome.fixed_text)
    except UnicodeEncodeError as error:
        result.error = f"cannot write fixes: they do not fit the file's encoding ({error})"
        return CheckedFile(result)
    return CheckedFile(result, fixed_data, identity)


def check_files(
    files: Sequence[Path],
    config: Config,
    fix_mode: str | None,
    unsafe: bool,
    jobs: int,
    roots: Sequence[Path] = (),
) -> list[FileResult]:
    names = [str(path) for path in files]
    task = partial(check_path, config=config, fix_mode=fix_mode, unsafe=unsafe)
    workers = jobs if jobs > 0 else (os.cpu_count() or 1)
    if workers <= 1 or len(names) < PARALLEL_THRESHOLD:
        return write_fixes(map(task, names), roots)
    chunk = max(1, len(names) // (workers * 8))
    with results_in_order(task, names, workers, chunk) as checked:
        return write_fixes(checked, roots)


def write_fixes(checked: Iterable[CheckedFile], roots: Sequence[Path]) -> list[FileResult]:
    """Write each file's fixes as its result arrives, in file order."""
    return list(_written(checked, roots))


def _written(checked: Iterable[CheckedFile], roots: Sequence[Path]) -> Iterator[FileResult]:
    for item in checked:
        if item.fixed_data is not None and item.read_as is not None:
            item.result.error = write_fixed_file(
                item.result.path, item.fixed_data, item.read_as, roots
            )
            if item.result.error is not None:
                item.result.fixed = 0
        yield item.result


def _report(
    results: list[FileResult],
    args: argparse.Namespace,
    to_stderr: bool = False,
    skipped: Sequence[FileResult] = (),
) -> int:
    output = sys.stderr if to_stderr else sys.stdout
    console = Console(
        file=output, highlight=False, no_color=args.no_color, soft_wrap=True, emoji=False
    )
    errors = Console(file=sys.stderr, highlight=False, no_color=args.no_color, soft_wrap=True)
    failed = False
    for result in [*skipped, *results]:
        if result.error is not None:
            errors.print(f"torchdoctor: {display_path(result.path)}: {result.error}", markup=False)
            failed = True
    for result in results:
        # a bug in torchdoctor, not in the user's code: said on stderr in every format, and
        # the exit code stays what the findings make it (see the README's exit codes)
        for crash in result.internal_errors:
            shown = display_path(result.path)
            errors.print(f"torchdoctor: warning: {crash.describe(shown)}", markup=False)
    findings = sum(len(result.findings) for result in results)
    if args.diff:
        diffs = [result.diff for result in results if result.diff]
        output.write("".join(diffs))
        if not args.quiet:
            errors.print(f"{len(diffs)} file(s) would be changed", markup=False)
        return EXIT_ERROR if failed else (EXIT_FINDINGS if diffs else EXIT_CLEAN)
    if args.format == "json":
        output.write(render_json(results) + "\n")
    elif args.format == "sarif":
        output.write(render_sarif(results) + "\n")
    elif args.format == "github":
        text = render_github(results)
        if text:
            output.write(text + "\n")
    else:
        unreadable = sum(1 for result in [*skipped, *results] if result.error is not None)
        _print_text(console, results, args, unreadable)
    if failed:
        return EXIT_ERROR
    return EXIT_FINDINGS if findings else EXIT_CLEAN


def _print_text(
    console: Console, results: list[FileResult], args: argparse.Namespace, unreadable: int
) -> None:
    for result in results:
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
    elif unreadable:
        console.print(
            f"No problems found in what was checked, but {unreadable} "
            f"path{'s' if unreadable != 1 else ''} could not be checked or fixed (see above).",
            markup=False,
        )
    else:
        console.print(
            f"All checks passed ({checked} file{'s' if checked != 1 else ''} checked).",
            markup=False,
        )
