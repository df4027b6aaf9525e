"""Every rule on real public code: each finding on the pinned corpus has a verdict in the ledger,
no true positive disappears, and the rules that are on by default are as precise as the README
says. Reads the corpus from local git mirrors (see bench/ecosystem.py); skips when they are not
on this machine, naming the missing repositories."""

from __future__ import annotations

import json

import pytest
from torchdoctor.analysis import REGISTRY

from bench import ecosystem

MIN_PRECISION = 0.95
MAX_NOISE_SHARE = 0.10


def test_every_ledger_line_is_well_formed() -> None:
    lines = ecosystem.LEDGER.read_text(encoding="utf-8").splitlines()
    keys = set()
    for number, line in enumerate(lines, 1):
        row = json.loads(line)
        assert set(row) == {"repo", "path", "line", "code", "verdict", "why"}, number
        assert row["verdict"] in ecosystem.VERDICTS, number
        assert row["why"].strip(), f"line {number} gives no reason"
        assert REGISTRY.get(row["code"]) is not None, f"line {number}: unknown code"
        key = (row["repo"], row["path"], row["line"], row["code"])
        assert key not in keys, f"line {number} repeats a finding"
        keys.add(key)


@pytest.fixture(scope="module")
def corpus_run() -> ecosystem.EcosystemRun:
    corpus, mirrors = ecosystem.default_corpus_dir(), ecosystem.default_mirror_dir()
    if not (corpus / "MANIFEST.tsv").is_file():
        pytest.skip(f"the corpus list is not on this machine ({corpus})")
    missing = ecosystem.missing_repositories(corpus, mirrors)
    if missing:
        pytest.skip(f"corpus mirrors not in {mirrors}: {', '.join(missing)}")
    # one process: forking worker processes from a test process that has started threads can
    # deadlock in the child (a lock held by another thread at the fork), and serial is about 5 s
    return ecosystem.run_corpus(corpus, mirrors, jobs=1)


def test_every_finding_has_a_verdict_and_no_true_positive_is_lost(
    corpus_run: ecosystem.EcosystemRun,
) -> None:
    diff = ecosystem.compare(corpus_run.findings, ecosystem.read_ledger(), corpus_run.repositories)
    assert not diff.unjudged and not diff.lost_true_positives, ecosystem.describe(diff)


def test_default_rules_meet_the_precision_bar(corpus_run: ecosystem.EcosystemRun) -> None:
    rows = ecosystem.rule_table(corpus_run.findings, ecosystem.read_ledger(), corpus_run.lines)
    below = [
        f"{row.code}: precision {row.precision:.2f}, noise {row.noise}/{row.findings}"
        for row in rows
        if row.default_on
        and row.findings
        and (
            (row.precision is not None and row.precision < MIN_PRECISION)
            or row.noise > MAX_NOISE_SHARE * row.findings
        )
    ]
    assert not below, "default-on rules below the bar on the corpus:\n" + "\n".join(below)


def test_the_committed_summary_is_current(corpus_run: ecosystem.EcosystemRun) -> None:
    rows = ecosystem.rule_table(corpus_run.findings, ecosystem.read_ledger(), corpus_run.lines)
    current = ecosystem.summary_json(rows, corpus_run)
    assert ecosystem.SUMMARY.read_text(encoding="utf-8") == current, (
        "tests/ecosystem/summary.json is stale: python -m bench ecosystem --write-summary, then "
        "python -m torchdoctor.reporting.rule_table --write README.md"
    )
