"""The benchmarks still run: each section on tiny inputs produces its table (no timing is
asserted; figures come from `python -m bench` by hand)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .conftest import ROOT


def test_bench_sections_produce_their_tables(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--only",
            "analysis",
            "throughput",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "results.md").read_text()
    assert "| file | lines | ast.parse (ms) | parse + analysis (ms) | ratio |" in report
    assert "| torchdoctor -j1 |" in report
    assert (tmp_path / "results.json").is_file()
