"""`torchdoctor probe` and the runner on its own, as a user runs them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from torchdoctor.probe.client import RUNNER_PATH
from torchdoctor.probe.runner import COMPANION_MODULES
from torchdoctor.probe.schema import ProbeReport

from .conftest import EXAMPLES, FIXTURES, copy_fixture, marked_line, needs_torch

pytestmark = [needs_torch, pytest.mark.timeout(180)]

QUICK = ["--iters", "2", "--threads", "1"]


def torchdoctor(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torchdoctor", "probe", *arguments],
        capture_output=True,
        text=True,
        timeout=170,
    )


def test_text_report_with_findings_exits_1() -> None:
    path = FIXTURES / "pitfalls.py"
    run = torchdoctor(f"{path}::Pitfalls", *QUICK)
    assert run.returncode == 1, run.stderr
    for heading in ("Modules", "Top operators", "Hot lines", "Runtime findings", "DDP"):
        assert heading in run.stdout or heading == "DDP" and "DistributedDataParallel" in (
            run.stdout
        )
    assert "float64" in run.stdout and "unused_head" in run.stdout
    assert "(4, 8, 16)" in run.stdout  # the input from the comment


def test_json_error_for_broken_code_exits_2(tmp_path: Path) -> None:
    path = copy_fixture("broken_syntax.py.txt", tmp_path, "broken.py")
    run = torchdoctor(f"{path}::Broken", "--json", *QUICK)
    assert run.returncode == 2
    event = json.loads(run.stdout)
    assert event["event"] == "error" and event["kind"] == "syntax"
    assert (event["file"], event["line"]) == (str(path), marked_line(path, "error-here") - 1)


def test_bad_arguments_exit_2_without_starting_torch(tmp_path: Path) -> None:
    run = torchdoctor(f"{tmp_path / 'missing.py'}::Net")
    assert run.returncode == 2 and "no such file" in run.stderr
    run = torchdoctor(str(EXAMPLES / "models.py"))  # three models: which one?
    assert run.returncode == 2 and "models.py::SmallCNN" in run.stderr


def test_runner_copied_out_of_the_package_runs_alone(tmp_path: Path) -> None:
    folder = tmp_path / "probe"  # the runner's folder and the modules it loads from beside it
    runner = folder / "runner"
    shutil.copytree(RUNNER_PATH, runner, ignore=shutil.ignore_patterns("__pycache__"))
    for name in COMPANION_MODULES:  # the standard-library modules it loads from next to it
        shutil.copy(RUNNER_PATH.with_name(f"{name}.py"), folder / f"{name}.py")
    shutil.copy(EXAMPLES / "models.py", tmp_path / "models.py")
    # The user's own modules named like the runner's: the model's imports get these, and the
    # runner's own modules are not importable by their short names.
    for name in ("timing", "inputs", "checks"):
        (tmp_path / f"{name}.py").write_text("OWN = True\n", encoding="utf-8")
    model = tmp_path / "net.py"
    model.write_text(
        "import importlib.util\n"
        "import checks, inputs, models, timing\n"
        "assert checks.OWN and inputs.OWN and timing.OWN\n"
        "assert not any(importlib.util.find_spec(n) for n in ('one_probe', 'graph_breaks'))\n"
        "class SmallCNN(models.SmallCNN):\n"
        "    pass\n",
        encoding="utf-8",
    )
    run = subprocess.run(
        [sys.executable, str(runner), "--file", str(model), "--target", "SmallCNN", *QUICK],
        capture_output=True,
        text=True,
        timeout=170,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},  # no PYTHONPATH: torchdoctor is not importable
    )
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    assert all(e["event"] == "progress" for e in events[:-1]) and len(events) > 5
    percents = [e["percent"] for e in events[:-1]]
    assert percents == sorted(percents)
    assert events[-1]["event"] == "result"
    report = ProbeReport.from_dict(events[-1]["report"], strict=True)
    assert report.target == "SmallCNN" and report.file == str(model)
