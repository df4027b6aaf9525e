"""A notebook's code cells analysed as one program, in cell order, and the findings mapped back
to their cells.

The program is the cells' Python (magics replaced, see magics.py) one after the other, each
cell's lines kept verbatim, so a finding's columns are the cell's columns and only its line
moves. A cell that does not parse on its own is blank in the program (its broken syntax would
run into the next cell) and reports its TD000 from an analysis of its own.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from .config import Config
from .document import Document
from .engine import analyse
from .findings import Edit, Finding, Fix, Span
from .fixes import apply_fixes
from .lines import LINE_BREAK
from .magics import as_python

SYNTAX_ERROR = "TD000"  # rule codes are a contract (README, Rules): a cell that does not parse
MAX_FIX_PASSES = 8  # as for files: a fix can uncover another; stop when a pass changes nothing


@dataclass(frozen=True)
class CodeCell:
    number: int  # 1-based position among all the notebook's cells, markdown included
    source: str


@dataclass(frozen=True)
class CellPlacement:
    number: int
    first_line: int  # where the cell starts in the program (0-based)
    line_count: int
    neutral_lines: frozenset[int]  # cell lines that hold IPython syntax, not the user's Python
    parses: bool
    python: str  # the cell as Python


@dataclass(frozen=True)
class NotebookProgram:
    text: str
    cells: tuple[CellPlacement, ...]

    def locate(self, line: int) -> tuple[CellPlacement, int] | None:
        """The cell holding program line `line`, and the line within it."""
        starts = [cell.first_line for cell in self.cells]
        index = bisect_right(starts, line) - 1
        if index < 0:
            return None
        cell = self.cells[index]
        if line - cell.first_line >= cell.line_count:
            return None  # past the end, or an empty cell (which holds no line)
        return cell, line - cell.first_line

    def cell(self, number: int) -> CellPlacement | None:
        return next((cell for cell in self.cells if cell.number == number), None)

    def to_cell(self, span: Span) -> tuple[int, Span] | None:
        """The cell number and the span within that cell; a span running into a later cell
        is cut at the end of its first cell's last line."""
        start = self.locate(span.start_line)
        if start is None:
            return None
        cell, line = start
        end_line = span.end_line - cell.first_line
        end_col = span.end_col
        last = max(cell.line_count - 1, 0)
        if end_line > last:
            end_line, end_col = last, len(_lines(cell.python)[last]) if cell.line_count else 0
        return cell.number, Span(line, span.start_col, end_line, end_col)

    def edit_in_cell(self, edit: Edit) -> tuple[int, Edit] | None:
        """An edit within one cell, off its IPython lines; None for any other edit."""
        start, end = self.locate(edit.span.start_line), self.locate(edit.span.end_line)
        filled = [cell for cell in self.cells if cell.line_count]
        if start is None and edit.span.start_line >= self.line_count and filled:
            last = filled[-1]  # an insertion at the very end of the program
            start = end = (last, edit.span.start_line - last.first_line)
        if start is None or end is None or start[0] is not end[0]:
            return None
        cell = start[0]
        lines = range(start[1], end[1] + 1)
        if not cell.parses or any(line in cell.neutral_lines for line in lines):
            return None
        shift = cell.first_line
        span = edit.span
        moved = Span(span.start_line - shift, span.start_col, span.end_line - shift, span.end_col)
        if moved.start_line >= cell.line_count:
            return _appended(cell, moved, edit.content)
        return cell.number, Edit(moved, edit.content)

    @property
    def line_count(self) -> int:
        if not self.cells:
            return 0
        last = self.cells[-1]
        return last.first_line + last.line_count


def _appended(cell: CellPlacement, span: Span, content: str) -> tuple[int, Edit] | None:
    """An insertion after the cell's last line. The program ends every cell with a line break;
    a cell whose source does not gets one in front of the inserted text instead."""
    if (span.start_line, span.start_col) != (span.end_line, span.end_col):
        return None  # only an insertion can lie past the last line
    if cell.python.endswith(("\n", "\r")) or not cell.python:
        return cell.number, Edit(span, content)
    last = cell.line_count - 1
    end = len(_lines(cell.python)[last])
    text = content[:-1] if content.endswith("\n") else content
    return cell.number, Edit(Span(last, end, last, end), "\n" + text)


def join_cells(cells: Sequence[CodeCell]) -> NotebookProgram:
    parts: list[str] = []
    placements: list[CellPlacement] = []
    line = 0
    for cell in cells:
        python = as_python(cell.source)
        text = python.text
        if text and not text.endswith(("\n", "\r")):
            text += "\n"
        count = len(LINE_BREAK.findall(text))
        placements.append(
            CellPlacement(
                cell.number, line, count, python.neutral_lines, python.parses, python.text
            )
        )
        # a cell that does not parse is blank here: its broken syntax stays in its own cell
        parts.append(text if python.parses else "".join(LINE_BREAK.findall(text)))
        line += count
    return NotebookProgram("".join(parts), tuple(placements))


@dataclass(frozen=True)
class NotebookAnalysis:
    program: NotebookProgram
    document: Document  # of the program
    findings: list[Finding]  # in program positions; fixes only where they stay in one cell


def analyse_notebook(
    cells: Sequence[CodeCell],
    config: Config,
    path: str,
    parse: Callable[[str, str], Document] = Document.parse,
    run: Callable[[Document, Config], list[Finding]] = analyse,
) -> NotebookAnalysis:
    """Every finding of the notebook's code cells, analysed together in cell order."""
    program = join_cells(cells)
    document = parse(program.text, path)
    findings = [
        _kept_in_cell(program, finding)
        for finding in run(document, config)
        if _on_users_python(program, finding)
    ]
    for cell in program.cells:
        if not cell.parses:
            findings.extend(_syntax_errors(cell, config, path, run))
    findings.sort(key=lambda f: (f.span.start_line, f.span.start_col, f.code))
    return NotebookAnalysis(program, document, findings)


def _syntax_errors(
    cell: CellPlacement, config: Config, path: str, run: Callable[[Document, Config], list[Finding]]
) -> Iterable[Finding]:
    """The TD000 of a cell that does not parse, from the cell alone, moved to its lines."""
    for finding in run(Document.parse(cell.python, path), config):
        if finding.code == SYNTAX_ERROR:
            span = finding.span
            yield replace(
                finding,
                span=Span(
                    span.start_line + cell.first_line,
                    span.start_col,
                    span.end_line + cell.first_line,
                    span.end_col,
                ),
            )


def _on_users_python(program: NotebookProgram, finding: Finding) -> bool:
    located = program.locate(finding.span.start_line)
    return located is not None and located[1] not in located[0].neutral_lines


def _kept_in_cell(program: NotebookProgram, finding: Finding) -> Finding:
    """The finding, without its fix when an edit would leave the cell or touch a magic."""
    if finding.fix is None:
        return finding
    if all(program.edit_in_cell(edit) is not None for edit in finding.fix.edits):
        return finding
    return replace(finding, fix=None)


def in_cell(program: NotebookProgram, finding: Finding) -> tuple[int, Finding] | None:
    """The finding as its cell sees it: span and fix edits in the cell's own lines."""
    located = program.to_cell(finding.span)
    if located is None:
        return None
    number, span = located
    fix = None
    if finding.fix is not None:
        moved = [program.edit_in_cell(edit) for edit in finding.fix.edits]
        if all(item is not None and item[0] == number for item in moved):
            edits = tuple(item[1] for item in moved if item is not None)
            fix = Fix(finding.fix.title, edits, finding.fix.safe)
    return number, replace(finding, span=span, fix=fix)


@dataclass(frozen=True)
class FixedNotebook:
    sources: dict[int, str]  # cell number -> new source, for the cells that changed
    applied: int
    analysis: NotebookAnalysis  # of the fixed cells


def fix_notebook(
    cells: Sequence[CodeCell],
    config: Config,
    path: str,
    unsafe: bool = False,
    run: Callable[[Document, Config], list[Finding]] = analyse,
) -> FixedNotebook:
    """Apply the fixes cell by cell until a pass changes nothing. Each cell's own source is
    edited (its magics stay as they are); the program is rebuilt for the next pass."""
    original = {cell.number: cell.source for cell in cells}
    current = dict(original)
    applied = 0
    analysis = analyse_notebook(cells, config, path, run=run)
    for _ in range(MAX_FIX_PASSES):
        by_cell: dict[int, list[Finding]] = {}
        for finding in analysis.findings:
            located = in_cell(analysis.program, finding)
            if located is not None and located[1].fix is not None:
                by_cell.setdefault(located[0], []).append(located[1])
        changed = False
        for number, found in by_cell.items():
            outcome = apply_fixes(current[number], found, unsafe=unsafe)
            if outcome.applied and outcome.text != current[number]:
                current[number] = outcome.text
                applied += len(outcome.applied)
                changed = True
        if not changed:
            break
        cells = [CodeCell(cell.number, current[cell.number]) for cell in cells]
        analysis = analyse_notebook(cells, config, path, run=run)
    changed_sources = {n: text for n, text in current.items() if text != original[n]}
    return FixedNotebook(changed_sources, applied, analysis)


def _lines(text: str) -> list[str]:
    return LINE_BREAK.split(text)
