"""`check` on a Jupyter notebook: its code cells analysed as one program, the findings reported
per cell, and `--fix` written back into the edited cells' sources only."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from ..analysis import Config, Document, Finding, analyse
from ..analysis.notebook import CodeCell, NotebookAnalysis, analyse_notebook, fix_notebook
from ..analysis.notebook_file import NotebookError, read_notebook, with_sources
from ..analysis.rule_runner import InternalError, collecting_internal_errors
from .display import display_path
from .formats import FileResult
from .source import Source, decode_source

NOTEBOOK_SUFFIX = ".ipynb"


def is_notebook(path: str) -> bool:
    return path.lower().endswith(NOTEBOOK_SUFFIX)


def check_notebook(
    data: bytes, path: str, config: Config, fix_mode: str | None, unsafe: bool
) -> tuple[FileResult, str, Source]:
    """The report, the notebook's text after fixes (the text itself when none apply) and how
    it was decoded. A file that is not a notebook is an error and is never written."""
    source = decode_source(data)
    text = source.text
    if not source.exact:
        return FileResult(path, error="not valid UTF-8: not a notebook"), text, source
    try:
        notebook = read_notebook(text)
    except NotebookError as error:
        return FileResult(path, error=f"cannot read the notebook: {error}"), text, source
    if notebook.language != "python":
        # an R or Julia notebook: nothing here is Python
        return FileResult(path), text, source
    cells = [CodeCell(cell.number, cell.source) for cell in notebook.code_cells]
    crashes: list[InternalError] = []
    run = _recording(crashes)
    if fix_mode is None:
        analysis = analyse_notebook(cells, config, path, run=run)
        return _result(path, analysis.findings, analysis, crashes), text, source
    fixed = fix_notebook(cells, config, path, unsafe=unsafe, run=run)
    fixed_text = with_sources(notebook, fixed.sources) if fixed.sources else text
    result = _result(path, fixed.analysis.findings, fixed.analysis, crashes)
    result.fixed = fixed.applied if fixed_text != text else 0
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
        before = analyse_notebook(cells, config, path, run=run)
        result.findings = before.findings
        result.notebook = before.program
    return result, fixed_text, source


def _result(
    path: str, findings: list[Finding], analysis: NotebookAnalysis, crashes: list[InternalError]
) -> FileResult:
    lines = analysis.document.index.lines
    return FileResult(path, findings, lines, internal_errors=crashes, notebook=analysis.program)


def _recording(crashes: list[InternalError]) -> Callable[[Document, Config], list[Finding]]:
    """The engine, with the rules that crash recorded once each (as for Python files)."""

    def run(document: Document, config: Config) -> list[Finding]:
        with collecting_internal_errors() as records:
            findings = analyse(document, config)
        known = {record.code for record in crashes}
        crashes.extend(record for record in records if record.code not in known)
        return findings

    return run
