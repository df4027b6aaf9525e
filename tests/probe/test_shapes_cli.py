"""`torchdoctor probe --lines`, `--batch-sweep --max-memory` and `torchdoctor probe-diff`, run
as a user runs them: real probes of real models on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import FIXTURES, needs_torch

pytestmark = [needs_torch, pytest.mark.timeout(300)]

QUICK = ["--iters", "3", "--threads", "1"]
MIB = 1024 * 1024


def torchdoctor(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torchdoctor", *arguments],
        capture_output=True, text=True, timeout=280,
    )


def test_lines_prints_forward_with_the_shapes_beside_each_line() -> None:
    path = FIXTURES / "line_shapes_models.py"
    run = torchdoctor("probe", f"{path}::CausalSelfAttention", "--lines", *QUICK)
    assert run.returncode == 0, run.stderr
    listing = {
        line.split(" | ", 1)[1].split("#")[0].strip(): line.rsplit("# ", 1)[-1]
        for line in run.stdout.splitlines()
        if " | " in line and "#" in line
    }
    # the input is (2, 5, 32) from the fixture's comment; 4 heads of 8
    assert listing["q, k, v = self.c_attn(x).split(self.n_embd, dim=2)"] == "→ q, k, v (2, 5, 32)"
    assert listing["att = F.softmax(att, dim=-1)"] == "→ att (2, 4, 5, 5)"
    assert listing["return self.c_proj(y)"] == "→ (2, 5, 32)"
    # the helper forward calls is listed too, after forward
    assert listing["scores = (q @ k.transpose(-2, -1)) * scale"] == "→ scores (2, 4, 5, 5)"
    assert run.stdout.index("  forward") < run.stdout.index("  scaled_scores")


def test_batch_sweep_finds_the_largest_batch_under_the_memory_cap() -> None:
    path = FIXTURES / "line_shapes_models.py"
    cap_mib = 4.0
    run = torchdoctor(
        "probe", f"{path}::SmallCNN", "--batch-sweep", "--max-memory", str(cap_mib),
        "--json", *QUICK,
    )
    assert run.returncode == 0, run.stderr
    sweep = json.loads(run.stdout)["report"]["batch_sweep"]
    cap = int(cap_mib * MIB)
    assert sweep["memory_limit_bytes"] == cap and sweep["stopped_by"] == "memory"
    points = {point["batch"]: point for point in sweep["points"]}
    largest = sweep["largest_fitting_batch"]
    assert largest is not None and largest > 1
    assert points[largest]["fits"] and points[largest]["peak_bytes"] <= cap
    # the binary search ended next to it: one more sample per batch goes over the cap
    assert not points[largest + 1]["fits"]
    assert points[largest + 1]["peak_bytes"] > cap
    assert points[largest + 1]["reason"] == "over the memory limit"
    for point in points.values():
        assert point["fits"] == (point["batch"] <= largest)
        if point["fits"]:
            assert point["samples_per_s"] == pytest.approx(
                point["batch"] * 1000 / point["latency_ms"]
            )
    # memory grows with the batch
    fitting = sorted(b for b, p in points.items() if p["fits"])
    peaks = [points[b]["peak_bytes"] for b in fitting]
    assert peaks == sorted(peaks)


def test_batch_sweep_recovers_from_a_real_out_of_memory_error() -> None:
    """Under a 1.5 GiB address-space limit the allocation itself fails; the sweep goes on with
    a smaller batch and the rest of the report is there."""
    path = FIXTURES / "grows_with_batch.py"
    run = torchdoctor(
        "probe", f"{path}::Wide", "--batch-sweep", "--memory-limit", "1536", "--json", *QUICK
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)["report"]
    sweep = report["batch_sweep"]
    points = {point["batch"]: point for point in sweep["points"]}
    failed = [b for b, p in points.items() if p["reason"] == "out of memory"]
    largest = sweep["largest_fitting_batch"]
    assert failed and largest is not None and largest < min(failed)
    assert points[largest + 1]["reason"] == "out of memory"
    # a batch tried after the first out-of-memory error still ran
    order = [point["batch"] for point in sweep["points"]]
    first_failure = next(i for i, b in enumerate(order) if points[b]["reason"] == "out of memory")
    assert any(points[b]["fits"] for b in order[first_failure:])
    assert report["latency"]["forward"]["median_ms"] > 0


def test_probe_diff_exits_1_on_a_model_made_slower_on_purpose(tmp_path: Path) -> None:
    fast = tmp_path / "fast.py"
    fast.write_text((FIXTURES / "slowed_on_purpose.py").read_text(encoding="utf-8"))
    slow = tmp_path / "slow.py"
    slow.write_text(fast.read_text(encoding="utf-8").replace("REPEATS = 1", "REPEATS = 400"))
    reports = {}
    for name, path in (("old", fast), ("new", slow)):
        run = torchdoctor("probe", f"{path}::Mlp", "--json", *QUICK)
        assert run.returncode == 0, run.stderr
        reports[name] = tmp_path / f"{name}.json"
        reports[name].write_text(run.stdout)

    old, new = str(reports["old"]), str(reports["new"])
    same = torchdoctor("probe-diff", old, old, "--max-slowdown", "1.1")
    assert same.returncode == 0, same.stdout + same.stderr

    slower = torchdoctor("probe-diff", old, new, "--max-slowdown", "1.1", "--json")
    assert slower.returncode == 1, slower.stdout + slower.stderr
    diff = json.loads(slower.stdout)
    assert any("above --max-slowdown 1.1" in failure for failure in diff["failures"])
    fc = next(change for change in diff["modules"] if change["name"] == "fc")
    assert fc["params"] == [64 * 64 + 64, 64 * 64 + 64]  # same layer, only slower
    assert fc["output_shapes"][0] == fc["output_shapes"][1] == [[4, 64]]

    # without a threshold the same diff is only shown
    shown = torchdoctor("probe-diff", old, new)
    assert shown.returncode == 0 and "fc" in shown.stdout


def test_probe_diff_says_which_file_is_not_a_report(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": 1}')
    run = torchdoctor("probe-diff", str(bad), str(bad))
    assert run.returncode == 2 and "bad.json" in run.stderr and "not a probe report" in run.stderr
