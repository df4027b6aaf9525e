"""What a probe costs, measured against simply running the model.

For the example CNN and transformer (examples/models.py), in one run:
- cold probe: a new warm-worker process (python start, `import torch`, warm-up) plus the probe;
- warm probe: a second probe in that same worker;
- bare script: a fresh `python` that imports torch and runs the same forward+backward steps
  the probe times (warm-up + iterations), with the same input and thread count;
- checker overhead: one forward+backward step under the runtime checker (float64, view,
  deferred NaN/Inf) against the same step bare, median of several, in the same process.

    python bench/probe_bench.py [--quick]      # prints a markdown table
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "server"))

from torchdoctor.probe.client import (  # noqa: E402 - needs the path above
    RUNNER_PATH,
    ProbeOptions,
    WorkerPool,
)
from torchdoctor.probe.schema import ProbeReport, ResultEvent  # noqa: E402

MODELS = ROOT / "examples" / "models.py"
TARGETS = ("SmallCNN", "TinyTransformer")
THREADS = 1

# Runs in a fresh interpreter: import torch, then the same training steps the probe times.
BARE_SCRIPT = """
import importlib.util, json, sys, time
started = time.perf_counter()
import torch
torch.set_num_threads({threads})
spec = importlib.util.spec_from_file_location("bench_models", {models!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
torch.manual_seed(0)
model = getattr(module, {target!r})()
shape, dtype = {shape!r}, {dtype!r}
x = torch.randint(0, 100, shape) if dtype == "int64" else torch.randn(shape)
steps_started = time.perf_counter()
for _ in range({steps}):
    model(x).sum().backward()
    model.zero_grad(set_to_none=True)
steps = time.perf_counter() - steps_started
print(json.dumps({{"steps_s": steps, "total_s": time.perf_counter() - started}}))
"""

# Runs in a fresh interpreter: the runner's own checker against bare steps, same process.
CHECKER_SCRIPT = """
import importlib.util, json, os, statistics, sys, time
import torch
torch.set_num_threads({threads})
def load(name, path, package=False):
    # the runner is a package folder: loaded by its __init__.py, its modules found beside it
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(path, "__init__.py") if package else path,
        submodule_search_locations=[path] if package else None,
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
runner = load("bench_runner", {runner!r}, package=True)
module = load("bench_models", {models!r})
torch.manual_seed(0)
model = getattr(module, {target!r})()
shape, dtype = {shape!r}, {dtype!r}
x = torch.randint(0, 100, shape) if dtype == "int64" else torch.randn(shape)

class Quiet:
    def emit(self, event):
        pass

user = runner.UserCode()
request = runner.ProbeRequest(file={models!r}, target={target!r})
inputs = runner.ChosenInput((x,), {{}}, "argument", "", None)
session = runner.Session(
    request, model, inputs, torch.device("cpu"), user, runner.OriginRecorder(user),
    runner.Progress(Quiet()),
)

def bare():
    model(x).sum().backward()
    model.zero_grad(set_to_none=True)

def checked():
    collector = runner.FindingCollector()
    mode = runner.make_check_mode(session, collector)
    with mode, runner.tracking_from_numpy(mode, user):
        output = model(x)
    runner.report_nonfinite_outputs(mode, output, collector)
    output.sum().backward()
    model.zero_grad(set_to_none=True)

def median_seconds(step, repeats):
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        step()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)

for _ in range(3):
    bare(); checked()
rounds = []
for _ in range({rounds}):
    rounds.append(median_seconds(checked, 3) / median_seconds(bare, 3))
print(json.dumps({{"ratio": statistics.median(rounds)}}))
"""


def run_python(code: str) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True
    )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def input_of(report: ProbeReport) -> tuple[list[int], str]:
    (tensor,) = report.input.tensors
    return tensor.shape, tensor.dtype


async def timed_probe(pool: WorkerPool, options: ProbeOptions) -> tuple[float, ProbeReport]:
    started = time.perf_counter()
    final = await pool.probe(sys.executable, options)
    elapsed = time.perf_counter() - started
    if not isinstance(final, ResultEvent):
        raise RuntimeError(f"probe failed: {final}")
    return elapsed, final.report


async def cold_and_warm(target: str, iters: int) -> tuple[float, float, ProbeReport]:
    options = ProbeOptions(str(MODELS), target, iters=iters, threads=THREADS)
    pool = WorkerPool()
    try:
        cold, _ = await timed_probe(pool, options)
        # After answering, a worker tidies up (a full gc.collect() with torch loaded takes about
        # 0.1-0.2 s) before it takes the next probe. A person clicks "Probe model" again seconds
        # later, not within that time: measure the warm probe once the worker is idle again.
        await asyncio.sleep(1.0)
        warm, report = await timed_probe(pool, options)
    finally:
        await pool.close()
    return cold, warm, report


def fixed_passes_s(report: ProbeReport) -> float:
    """Seconds the warm probe spent outside its timing stage, from the report itself."""
    return sum(seconds for stage, seconds in report.stage_seconds.items() if stage != "timing")


def measure_model(target: str, iters: int, rounds: int) -> dict[str, Any]:
    cold, warm, report = asyncio.run(cold_and_warm(target, iters))
    shape, dtype = input_of(report)
    timed = report.latency.forward_backward
    assert timed is not None
    steps = timed.warmup + timed.iterations
    settings = {"threads": THREADS, "models": str(MODELS), "target": target, "shape": shape,
                "dtype": dtype}
    bare = run_python(BARE_SCRIPT.format(steps=steps, **settings))
    checker = run_python(
        CHECKER_SCRIPT.format(runner=str(RUNNER_PATH), rounds=rounds, **settings)
    )
    return {
        "input": report.input.spec,
        "steps": steps,
        "cold_probe_s": cold,
        "warm_probe_s": warm,
        "bare_script_s": bare["total_s"],
        "bare_steps_s": bare["steps_s"],
        "cold_vs_bare_script": cold / bare["total_s"],
        "warm_vs_bare_steps": warm / bare["steps_s"],
        # The probe also runs passes a bare loop does not (shapes, checks, FLOPs, the profiled
        # step, loading and building the model): the report times each one. The target is the
        # warm probe against the bare steps plus those passes.
        "fixed_passes_s": fixed_passes_s(report),
        "warm_vs_bare_plus_passes": warm / (bare["steps_s"] + fixed_passes_s(report)),
        "checker_overhead": checker["ratio"],
        "fwd_bwd_median_ms": timed.median_ms,
    }


def run_probe_bench(quick: bool) -> dict[str, Any]:
    """Cold/warm probe times, bare-script times and their ratios, and the checker's overhead
    ratio, for each example model."""
    iters, rounds = (3, 3) if quick else (10, 7)
    results = {target: measure_model(target, iters, rounds) for target in TARGETS}
    return {
        "python": sys.version.split()[0],
        "threads": THREADS,
        "iters": iters,
        "models": results,
    }


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"Probe cost (Python {results['python']}, {results['threads']} thread, "
        f"--iters {results['iters']})",
        "",
        "| model | input | cold probe | warm probe | bare script (import + steps) | "
        "bare steps | fixed passes | cold / bare script | warm / bare steps | "
        "warm / (bare steps + fixed passes) | checker overhead |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in results["models"].items():
        lines.append(
            f"| {name} | {row['input']} | {row['cold_probe_s']:.2f} s | "
            f"{row['warm_probe_s']:.2f} s | {row['bare_script_s']:.2f} s | "
            f"{row['bare_steps_s']:.3f} s ({row['steps']} steps) | "
            f"{row['fixed_passes_s']:.3f} s | "
            f"{row['cold_vs_bare_script']:.1f}x | {row['warm_vs_bare_steps']:.1f}x | "
            f"{row['warm_vs_bare_plus_passes']:.2f}x | "
            f"{row['checker_overhead']:.2f}x |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    print(markdown(run_probe_bench(parser.parse_args().quick)))
