"""The benchmarks still run: each section on tiny inputs produces its table (no timing is
asserted; figures come from `python -m bench` by hand)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

# Each section, and a line its markdown table must contain.
SECTIONS = {
    "analysis": "| file | lines | ast.parse (ms) | parse + analysis (ms) | ratio |",
    "throughput": "| torchdoctor -j1 |",
    "lsp": "| keystroke → diagnostics, 3,037-line file |",
    "probe": "| SmallCNN |",
}


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_bench_section_produces_its_table(section: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", section, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "results.md").read_text()
    assert SECTIONS[section] in report, report
    assert (tmp_path / "results.json").is_file()


def test_the_edit_bench_times_the_engine_and_compares_two_trees() -> None:
    """`bench.edit_bench` on a small file: back to back, and against a tree (here this one);
    letters typed, and Enter keystrokes."""
    for extra in ([], ["--against", str(ROOT)], ["--enter"], ["--enter", "--against", str(ROOT)]):
        done = subprocess.run(
            [sys.executable, "-m", "bench.edit_bench", "--lines", "300", "--edits", "4", *extra],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        edits = "Enter keystrokes" if "--enter" in extra else "edits"
        expected = f"{edits} in turn" if "--against" in extra else f"{edits} back to back"
        assert f"dense 300 lines, 4 {expected}: " in done.stdout, done.stdout
        if "--against" in extra:
            assert "median ratio" in done.stdout


def test_the_start_bench_times_both_files_for_each_server() -> None:
    """`bench.start_bench`, one start of each server per file, against a tree (here this one)."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.start_bench", "--starts", "1", "--against", str(ROOT)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    for name in ("300 lines, models and training functions", "3,002 lines dense with findings"):
        assert f"| {name} | torchdoctor | " in done.stdout, done.stdout
        assert f"| {name} | torchdoctor at {ROOT} | " in done.stdout, done.stdout


def test_a_summed_row_shows_the_median_files_own_ratio_beside_the_sum() -> None:
    """The corpus rows sum each file's best time; the median file's ratio sits beside the sum,
    since a sum is weighed by the longest files."""
    from torchdoctor.analysis.config import Config

    from bench.analysis_bench import _summed, markdown
    from bench.corpus import corpus_texts

    texts = corpus_texts(3)
    row = _summed(texts, Config(select=("ALL",)), repeats=1)
    assert row["lines"] == sum(text.count("\n") for text in texts)
    assert row["ast_parse_ms"] > 0 and row["analysis_ms"] > 0
    table = markdown({"three generated files": row})
    assert f"{row['ratio']:.2f}× (median file {row['median_file_ratio']:.2f}×)" in table
