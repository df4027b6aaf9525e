"""The one formatter of measurements gives the spec's text for every shared case (the same file
the extension's TypeScript formatter is tested against)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from torchdoctor.probe import units

from ..conftest import ROOT

CASES: dict[str, Any] = json.loads(
    (ROOT / "tests" / "fixtures" / "format_cases.json").read_text(encoding="utf-8")
)
ALL_CASES = [
    (kind, value, expected)
    for kind, rows in CASES.items()
    if not kind.startswith("_")
    for value, expected in rows
]


@pytest.mark.parametrize(("kind", "value", "expected"), ALL_CASES)
def test_shared_case(kind: str, value: Any, expected: str) -> None:
    assert getattr(units, kind)(value) == expected


def test_every_formatter_has_cases() -> None:
    public = {"size", "count", "flops", "milliseconds", "shape", "shapes", "percent"}
    assert {kind for kind in CASES if not kind.startswith("_")} == public
