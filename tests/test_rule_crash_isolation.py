"""A rule that raises on a file costs its own findings for that file and nothing else: `check`
still reports the other rules' findings for it and for the other files, and says which rule
failed where; the language server does the same without running the analysis again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from torchdoctor.analysis import REGISTRY, Config, Document, Severity
from torchdoctor.analysis.context import RuleContext
from torchdoctor.analysis.findings import Rule, RuleInfo
from torchdoctor.analysis.rule_runner import (
    collecting_internal_errors,
    findings_of,
    run_rule,
)
from torchdoctor.cli import main
from torchdoctor.lsp.rule_runs import run_rules

MISSING_ZERO_GRAD = """\
import torch

for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
"""


def crash_on_loops(context: RuleContext) -> Iterator[object]:
    """A rule with a bug: it raises on any file with a `for` loop, after yielding nothing."""
    if "for " in context.doc.text:
        raise KeyError("a rule bug")
    yield from ()


@pytest.fixture
def crashing_rule(monkeypatch: pytest.MonkeyPatch) -> Rule:
    info = RuleInfo("TD998", "crashes-on-loops", Severity.WARNING, "test rule", fixable=False)
    rule = Rule(info, crash_on_loops)
    monkeypatch.setitem(REGISTRY.rules, "TD998", rule)
    monkeypatch.setitem(REGISTRY.infos, "TD998", info)
    return rule


def context_for(text: str) -> RuleContext:
    document = Document.parse(text, "train.py")
    return RuleContext(document, document.semantics, Config())


def test_a_raising_rule_gives_no_findings_and_a_record_naming_rule_file_and_place(
    crashing_rule: Rule,
) -> None:
    outcome = run_rule(crashing_rule, context_for(MISSING_ZERO_GRAD))

    assert outcome.findings == []
    assert outcome.error is not None
    assert (outcome.error.code, outcome.error.path) == ("TD998", "train.py")
    assert outcome.error.error == "KeyError: 'a rule bug'"
    assert outcome.error.raised_at.startswith("test_rule_crash_isolation.py:")
    assert outcome.error.traceback.endswith("KeyError: 'a rule bug'")
    line = outcome.error.describe()
    assert "rule TD998 failed on train.py (KeyError: 'a rule bug'" in line


def test_a_rule_that_works_gives_its_findings_and_no_record() -> None:
    td101 = REGISTRY.rules["TD101"]
    outcome = run_rule(td101, context_for(MISSING_ZERO_GRAD))
    assert [finding.code for finding in outcome.findings] == ["TD101"]
    assert outcome.error is None


def test_records_reach_the_block_that_collects_them_only(crashing_rule: Rule) -> None:
    context = context_for(MISSING_ZERO_GRAD)
    with collecting_internal_errors() as outer:
        with collecting_internal_errors() as inner:
            assert findings_of(crashing_rule, context) == []
        findings_of(REGISTRY.rules["TD101"], context)
    assert [record.code for record in inner] == ["TD998"]
    assert outer == []
    # outside any block a crash is only logged: the caller that did not ask still gets findings
    assert findings_of(crashing_rule, context) == []


def test_check_reports_the_other_rules_and_names_the_crashed_rule(
    crashing_rule: Rule, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loop_file = tmp_path / "train.py"
    loop_file.write_text(MISSING_ZERO_GRAD)
    other_file = tmp_path / "other.py"
    other_file.write_text("import torch\nx = torch.autograd.Variable(torch.ones(1))\n")

    exit_code = main(["check", "--no-color", "--select", "ALL", str(tmp_path)])

    out, err = capsys.readouterr()
    assert f"{loop_file}:5:5: TD101" in out
    assert f"{other_file}:2:5: TD704" in out
    assert f"warning: internal error: rule TD998 failed on {loop_file} (KeyError" in err
    assert str(other_file) not in err  # the rule ran there without raising
    assert "Traceback" not in err  # one line for the user; the traceback is for a log
    assert exit_code == 1  # the findings decide the exit code, as the README says


def test_the_server_keeps_the_other_rules_and_reports_the_crash_once(
    crashing_rule: Rule,
) -> None:
    document = Document.parse(MISSING_ZERO_GRAD + "\ndef f(:\n", "x.py")

    findings, crashes = run_rules(document, Config(select=("ALL",)))

    assert [crash.code for crash in crashes] == ["TD998"]
    codes = [finding.code for finding in findings]
    assert codes.count("TD000") == 1
    assert "TD101" in codes
