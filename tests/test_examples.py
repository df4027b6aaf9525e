"""The bundled examples: `check` finds exactly the planted pitfalls, and `--fix` removes them
while the files still parse and run."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

EXAMPLES = ROOT / "examples"
PLANTED = re.compile(r"#\s*planted:\s*(TD\d{3})")
TRAINING_SCRIPTS = ["train_mnist.py", "finetune.py", "gan.py"]


def _planted() -> set[tuple[str, int, str]]:
    found = set()
    for path in sorted(EXAMPLES.glob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for code in PLANTED.findall(line):
                found.add((path.name, number, code))
    return found


def _check_json(*paths: Path, extra: tuple[str, ...] = ()) -> list[dict]:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "torchdoctor",
            "check",
            "--format",
            "json",
            *extra,
            *map(str, paths),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode in (0, 1), completed.stderr
    return json.loads(completed.stdout)


def test_check_finds_the_planted_pitfalls_and_nothing_else() -> None:
    findings = _check_json(EXAMPLES)
    reported = {(Path(f["path"]).name, f["line"], f["code"]) for f in findings}
    assert reported == _planted()
    assert len(_planted()) >= 4


def test_fix_removes_the_pitfalls_and_the_scripts_still_run(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="running the fixed examples needs torch")
    for name in TRAINING_SCRIPTS:
        shutil.copy(EXAMPLES / name, tmp_path / name)
    completed = subprocess.run(
        [sys.executable, "-m", "torchdoctor", "check", "--fix", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # information hints (a per-step `.item()`) may remain; no warning or error may
    assert completed.returncode in (0, 1), completed.stdout + completed.stderr
    assert "Fixed" in completed.stdout
    remaining = _check_json(tmp_path)
    assert all(f["severity"] == "information" for f in remaining), remaining
    fixed_mnist = (tmp_path / "train_mnist.py").read_text()
    assert "optimizer.zero_grad()" in fixed_mnist and "total_loss += loss.item()" in fixed_mnist
    for name in TRAINING_SCRIPTS:
        run = subprocess.run(
            [sys.executable, str(tmp_path / name)], capture_output=True, text=True, timeout=180
        )
        assert run.returncode == 0, f"{name} failed after --fix:\n{run.stderr[-2000:]}"


def test_the_unfixed_gan_really_raises() -> None:
    """The TD103 planted in gan.py is a real crash, not a style complaint."""
    pytest.importorskip("torch", reason="running the example needs torch")
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "gan.py")], capture_output=True, text=True, timeout=180
    )
    assert run.returncode != 0
    assert "Trying to backward through the graph a second time" in run.stderr
