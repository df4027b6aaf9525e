"""Every rule's positive and negative fixtures.

A fixture lives in tests/fixtures/<CODE>/. Each line that must be flagged carries a
`# expect: <CODE>` marker; negative fixtures (`negative_*.py`) carry none. The test compares
the findings of the fixture's own code (and of any code named in a marker) with the markers, so
a missing finding and a squiggle on correct code both fail. That every rule has both kinds is
checked with the rest of the "Adding a rule" checklist, in test_rule_checklist.py.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections import Counter
from pathlib import Path

import pytest
from torchdoctor.analysis import Config, Document, check
from torchdoctor.reporting.checking import check_source

from .conftest import expected_findings, fixture_files

ALL = Config(select=("ALL",))


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


@pytest.mark.parametrize("path", fixture_files(), ids=_id)
def test_fixture_findings_match_markers(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    expected = expected_findings(text)
    codes = {path.parent.name} | {code for _, code in expected}
    found = {
        (f.span.start_line + 1, f.code) for f in check(text, str(path), ALL) if f.code in codes
    }
    assert found == expected, (
        f"missing: {sorted(expected - found)}; unexpected: {sorted(found - expected)}"
    )


@pytest.mark.parametrize("path", fixture_files(), ids=_id)
def test_fixture_names_say_what_they_are(path: Path) -> None:
    expected = expected_findings(path.read_text(encoding="utf-8"))
    if path.name.startswith("negative"):
        assert not {code for _, code in expected if code == path.parent.name}
    else:
        assert path.name.startswith("positive"), "fixtures are named positive_*.py or negative_*.py"
        assert any(code == path.parent.name for _, code in expected), (
            "a positive fixture marks a line"
        )


@pytest.mark.parametrize("path", fixture_files(), ids=_id)
def test_fixes_round_trip(path: Path) -> None:
    """`--fix` gives code that parses, no finding it fixed comes back, a second `--fix` changes
    nothing, and no identifier disappears except inside the ranges the fixes replaced."""
    text = path.read_text(encoding="utf-8")
    first = check(text, str(path), ALL)
    if not any(f.fix is not None for f in first):
        pytest.skip("no fixable finding in this fixture")
    outcome = check_source(text.encode(), str(path), ALL, "fix", True)
    fixed = outcome.fixed_text
    assert fixed != text
    ast.parse(fixed)
    assert not [f for f in check(fixed, str(path), ALL) if f.fix is not None]
    again = check_source(fixed.encode(), str(path), ALL, "fix", True)
    assert again.fixed_text == fixed, "a second --fix changed the file again"
    replaced = "\n".join(
        Document.parse(text).text_in(edit.span)
        for finding in first
        if finding.fix is not None
        for edit in finding.fix.edits
    )
    lost = _names(text) - _names(fixed) - _names(replaced)
    assert not lost, f"identifiers lost by the fixes: {sorted(lost)}"


def _names(text: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.NAME:
                counts[token.string] += 1
    except (tokenize.TokenError, SyntaxError):
        pass
    return counts
