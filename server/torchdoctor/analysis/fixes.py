"""Applying fixes to text. The editor and `--fix` share this, so both give the same result."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .findings import Edit, Finding, Fix
from .lines import LineIndex


@dataclass(frozen=True)
class FixResult:
    text: str
    applied: list[Finding]
    skipped: list[Finding]  # fixes that overlapped one already taken; re-run to apply them


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """Apply non-overlapping edits (positions refer to the original text)."""
    index = LineIndex.of(text)
    starts = index.offsets()

    def offset(line: int, col: int) -> int:
        if line >= len(starts):
            return len(text)
        line, col = index.clamp(line, col)
        return starts[line] + col

    ordered = sorted(edits, key=lambda e: (e.span.start_line, e.span.start_col), reverse=True)
    result = text
    for edit in ordered:
        start = offset(edit.span.start_line, edit.span.start_col)
        end = offset(edit.span.end_line, edit.span.end_col)
        result = result[:start] + edit.content + result[end:]
    return result


def _conflicts(fix: Fix, taken: list[Edit]) -> bool:
    for edit in fix.edits:
        for other in taken:
            if edit.span.overlaps(other.span):
                return True
            # two insertions at one point, or an insertion at the edge of a replaced range,
            # would interleave unpredictably: take one now and the other on the next pass
            if (edit.span.start_line, edit.span.start_col) in (
                (other.span.start_line, other.span.start_col),
                (other.span.end_line, other.span.end_col),
            ) or (other.span.start_line, other.span.start_col) == (
                edit.span.end_line,
                edit.span.end_col,
            ):
                return True
    return False


def apply_fixes(text: str, findings: Iterable[Finding], *, unsafe: bool = False) -> FixResult:
    """Apply the fix of every finding that has one, skipping fixes that overlap an earlier one."""
    taken: list[Edit] = []
    applied: list[Finding] = []
    skipped: list[Finding] = []
    for finding in findings:
        fix = finding.fix
        if fix is None or (not fix.safe and not unsafe):
            continue
        if _conflicts(fix, taken):
            skipped.append(finding)
            continue
        taken.extend(fix.edits)
        applied.append(finding)
    return FixResult(apply_edits(text, taken), applied, skipped)
