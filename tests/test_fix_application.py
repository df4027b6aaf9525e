"""Overlapping fixes are refused, never merged: what `--fix` and the editor's fix-all write is
the original text with each applied fix's ranges replaced, and every other character kept."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from torchdoctor.analysis.findings import Edit, Finding, Fix, Severity, Span
from torchdoctor.analysis.fixes import apply_fixes
from torchdoctor.analysis.lines import LineIndex

LINES = st.lists(st.text(alphabet="ab(), \tπ", max_size=12), min_size=1, max_size=6)


def offset_of(text: str, line: int, col: int) -> int:
    index = LineIndex.of(text)
    return index.offsets()[line] + col


@st.composite
def text_and_findings(draw: st.DrawFn) -> tuple[str, list[Finding]]:
    lines = draw(LINES)
    text = "\n".join(lines) + "\n"
    positions = [(n, c) for n, line in enumerate(lines) for c in range(len(line) + 1)]
    findings = []
    for _ in range(draw(st.integers(0, 5))):
        edits = []
        for _ in range(draw(st.integers(1, 2))):
            start, end = sorted(draw(st.lists(st.sampled_from(positions), min_size=2, max_size=2)))
            content = draw(st.text(alphabet="xyz\n", max_size=4))
            edits.append(Edit(Span(*start, *end), content))
        if len(edits) == 2 and _touch(edits[0].span, edits[1].span):
            edits = edits[:1]  # one fix never overlaps itself
        fix = Fix("fix", tuple(edits))
        findings.append(Finding("TD000", "test", "m", edits[0].span, Severity.WARNING, fix))
    return text, findings


def _touch(a: Span, b: Span) -> bool:
    a_start, a_end = (a.start_line, a.start_col), (a.end_line, a.end_col)
    b_start, b_end = (b.start_line, b.start_col), (b.end_line, b.end_col)
    return not (a_end < b_start or b_end < a_start)


@settings(max_examples=300, deadline=None)
@given(text_and_findings())
def test_applied_fixes_never_touch_and_everything_else_is_kept(
    case: tuple[str, list[Finding]],
) -> None:
    text, findings = case
    result = apply_fixes(text, findings)
    taken = [edit for finding in result.applied for edit in finding.fix.edits]  # type: ignore[union-attr]

    # no two applied edits overlap or meet, so their order cannot change the outcome
    for i, first in enumerate(taken):
        for second in taken[i + 1 :]:
            assert not _touch(first.span, second.span)
    # every refused fix collides with one that was applied
    for finding in result.skipped:
        assert any(_touch(edit.span, other.span) for edit in finding.fix.edits for other in taken)  # type: ignore[union-attr]
    assert len(result.applied) + len(result.skipped) == len(findings)

    # the result is the original text with exactly the applied ranges replaced
    expected, cursor = [], 0
    for edit in sorted(taken, key=lambda e: (e.span.start_line, e.span.start_col)):
        start = offset_of(text, edit.span.start_line, edit.span.start_col)
        end = offset_of(text, edit.span.end_line, edit.span.end_col)
        expected += [text[cursor:start], edit.content]
        cursor = end
    expected.append(text[cursor:])
    assert result.text == "".join(expected)
