"""Shared test helpers: fixture discovery and the `# expect: TDxxx` markers of fixtures."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).parent
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
EXPECT = re.compile(r"#\s*expect:\s*(TD\d{3}(?:\s*,\s*TD\d{3})*)")


def expected_findings(text: str) -> set[tuple[int, str]]:
    """(1-based line, code) pairs marked in a fixture with `# expect: TD101[, TD104]`."""
    expected: set[tuple[int, str]] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            for code in match.group(1).split(","):
                expected.add((number, code.strip()))
    return expected


def fixture_files() -> list[Path]:
    return sorted(FIXTURES.glob("TD*/*.py"))
