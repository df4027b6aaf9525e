"""The extension bundles the server's Python dependencies from pyproject.toml alone: its
bundling script names no requirement of its own that could drift from the project's."""

from __future__ import annotations

import re

from .conftest import ROOT

SCRIPT = ROOT / "vscode-extension" / "scripts" / "bundle-python.mjs"
REQUIREMENT = re.compile(r"""["'][A-Za-z][\w.-]*\s*(?:[<>=!~]=|[<>])\s*\d""")


def test_the_bundling_script_pins_nothing_itself() -> None:
    text = SCRIPT.read_text(encoding="utf-8")
    assert REQUIREMENT.findall(text) == []
    assert "['project']['dependencies']" in text  # it reads them from pyproject.toml


def test_the_pattern_finds_a_pin_when_there_is_one() -> None:
    assert REQUIREMENT.findall('const deps = ["jedi>=0.19", "rich>=13"];') == [
        '"jedi>=0',
        '"rich>=1',
    ]
