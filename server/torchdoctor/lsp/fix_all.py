"""Fix all: the same passes as `torchdoctor check --fix`, on the editor's text, as one edit.

The loop mirrors `reporting.checking.check_source` (apply every fix that does not overlap an
earlier one, re-analyse, repeat until nothing changes) so that the editor and the CLI give
byte-identical files; a test compares the two on every example file.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from ..analysis import Config, Document, Finding, Span
from ..analysis.fixes import apply_fixes
from ..analysis.lines import LINE_BREAK
from .rule_runs import run_rules

MAX_FIX_PASSES = 8  # the CLI's limit: a fix can uncover or unblock another


def fix_all_text(text: str, path: str, config: Config, findings: list[Finding]) -> str:
    """`text` with every safe fix applied, given the findings already computed for it."""
    if not any(finding.fix for finding in findings):
        return text
    fixed = text
    for _ in range(MAX_FIX_PASSES):
        outcome = apply_fixes(fixed, findings)
        if not outcome.applied or outcome.text == fixed:
            break
        fixed = outcome.text
        findings, _ = run_rules(Document.parse(fixed, path), config)
    return fixed


@dataclass(frozen=True)
class TextReplacement:
    span: Span  # in the old text, code-point columns
    content: str


def minimal_replacement(old: str, new: str) -> TextReplacement | None:
    """One replacement that turns `old` into `new`, covering only the part that differs, so the
    editor keeps the cursor, folds and undo history of the untouched lines."""
    if old == new:
        return None
    limit = min(len(old), len(new))
    prefix = 0
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    start, old_end, new_end = prefix, len(old) - suffix, len(new) - suffix
    # a position cannot fall between the \r and \n of a line break
    if 0 < start < len(old) and old[start - 1] == "\r" and old[start] == "\n":
        start -= 1
    if 0 < old_end < len(old) and old[old_end - 1] == "\r" and old[old_end] == "\n":
        old_end += 1
        new_end += 1
    starts = _line_starts(old)
    return TextReplacement(
        Span(*_line_col(starts, start), *_line_col(starts, old_end)),
        new[start:new_end],
    )


def _line_starts(text: str) -> list[int]:
    return [0, *(match.end() for match in LINE_BREAK.finditer(text))]


def _line_col(starts: list[int], offset: int) -> tuple[int, int]:
    line = bisect.bisect_right(starts, offset) - 1
    return line, offset - starts[line]
