"""The README tells the truth: its rule table is the registry's, every rule has both doc pages,
and the commands it names exist."""

from __future__ import annotations

import re

from torchdoctor.analysis import REGISTRY
from torchdoctor.docs import doc_page, documented_codes
from torchdoctor.reporting.rule_table import load_corpus_summary, with_current_table

from .conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
CORPUS_SUMMARY = load_corpus_summary(ROOT / "tests" / "ecosystem" / "summary.json")


def test_rule_table_is_current() -> None:
    assert with_current_table(README, CORPUS_SUMMARY) == README, (
        "README rule table is stale: python -m torchdoctor.reporting.rule_table --write README.md"
    )


def test_registry_docs_and_readme_name_the_same_codes() -> None:
    registry = {info.code for info in REGISTRY}
    table = set(re.findall(r"^\| \[(TD\d{3})\]", README, re.MULTILINE))
    assert table == registry
    assert documented_codes("en") == registry
    assert documented_codes("zh-CN") == registry


def test_every_doc_page_renders_with_its_title() -> None:
    for info in REGISTRY:
        for locale in ("en", "zh-CN"):
            page = doc_page(info.code, locale)
            assert page is not None
            assert page.startswith(f"# {info.code} {info.name}"), (info.code, locale)
            assert "```python" in page, f"{info.code} ({locale}) has no example"


def test_the_setup_and_test_commands_exist() -> None:
    for script in ("scripts/demo.sh", "scripts/test.sh"):
        assert script in README
        assert (ROOT / script).is_file()
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
