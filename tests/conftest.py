"""Shared test helpers: fixture discovery and the `# expect: TDxxx` markers of fixtures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked `gpu` (run by scripts/gpu-check.sh) must skip, with its reason, where
    there is no CUDA device: it needs a `skipif` beside the mark."""
    unguarded = [
        item.nodeid
        for item in items
        if item.get_closest_marker("gpu") is not None
        and item.get_closest_marker("skipif") is None
    ]
    if unguarded:
        raise pytest.UsageError(
            "tests marked gpu without a skipif for machines with no CUDA device: "
            + ", ".join(unguarded)
        )
