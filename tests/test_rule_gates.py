"""A rule that names what its findings spell (`rule(spells=...)`) is not run on a file that
spells none of those names. The skip must never cost a finding: every such rule is run anyway,
on every fixture, example and generated file, and wherever the engine would skip it, it must
find nothing there."""

from __future__ import annotations

from pathlib import Path

import pytest
from torchdoctor.analysis import Config, Document
from torchdoctor.analysis.context import RuleContext
from torchdoctor.analysis.findings import REGISTRY, Rule

from bench.corpus import make_file

from .conftest import fixture_files

ROOT = Path(__file__).resolve().parent.parent
ALL = Config(select=("ALL",))


def _texts() -> list[tuple[str, str]]:
    paths = [*fixture_files(), *sorted((ROOT / "examples").rglob("*.py"))]
    texts = [(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")) for path in paths]
    texts += [(f"generated {lines} lines", make_file(lines, seed=lines)) for lines in (100, 500)]
    return texts


TEXTS = _texts()
GATED = [rule for _, rule in sorted(REGISTRY.rules.items()) if rule.spells]


def test_some_rules_are_gated() -> None:
    assert GATED, "no rule names what its findings spell"


@pytest.mark.parametrize("rule", GATED, ids=lambda rule: rule.info.code)
def test_a_skipped_rule_would_have_found_nothing(rule: Rule) -> None:
    skipped = 0
    for name, text in TEXTS:
        document = Document.parse(text, name)
        semantics = document.semantics
        if rule.may_find_in(semantics):
            continue
        skipped += 1
        found = list(rule.check(RuleContext(document, semantics, ALL)))
        assert not found, f"{rule.info.code} skipped on {name}, where it finds {found[0]}"
    assert skipped, f"{rule.info.code}'s names are spelt by every file here: the test shows nothing"


@pytest.mark.parametrize("rule", GATED, ids=lambda rule: rule.info.code)
def test_its_own_fixtures_spell_its_names(rule: Rule) -> None:
    """Every positive fixture of the rule is a file the engine runs it on: its names cover each
    way of writing the bug the fixtures show (test_rule_fixtures.py checks what it finds)."""
    code = rule.info.code
    positives = [
        path
        for path in fixture_files()
        if path.parent.name == code and not path.name.startswith("negative")
    ]
    assert positives
    for path in positives:
        semantics = Document.parse(path.read_text(encoding="utf-8"), str(path)).semantics
        assert rule.may_find_in(semantics), f"{code} would be skipped on {path.name}"
