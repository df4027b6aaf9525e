"""What the distributed probe costs, against a bare torchrun script doing the same steps.

For the example CNN and transformer (examples/models.py), 2 ranks, gloo on CPU:
- probe: `run_distributed_probe` end to end (launch, rendezvous, DDP and FSDP2, warm-up, timed
  steps, one profiled step, result files, summary), wall time;
- bare: `python -m torch.distributed.run` of a script that builds the same model, wraps it the
  same way (DDP; fully_shard per top-level block and the root), and runs the same warm-up and
  timed AdamW steps on the same input size, wall time; rank 0's median step is reported too.

    python bench/distributed_bench.py [--quick]      # prints a markdown table
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "server"))

from torchdoctor.probe.client import ProbeLimits  # noqa: E402 - needs the path above
from torchdoctor.probe.distributed import (  # noqa: E402
    DistributedOptions,
    run_distributed_probe,
)

MODELS = ROOT / "examples" / "models.py"
CASES = (("SmallCNN", "(8, 3, 32, 32)", "float32"), ("TinyTransformer", "(8, 64):int64", "int64"))
NPROC = 2

# One rank of the bare job: the same steps the probe times, and nothing else.
BARE_SCRIPT = """
import importlib.util, json, os, statistics, sys, time
import torch, torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel
torch.set_num_threads(1)
dist.init_process_group("gloo")
spec = importlib.util.spec_from_file_location("bench_models", {models!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
shape, dtype = {shape!r}, {dtype!r}
medians = {{}}
for strategy in ("ddp", "fsdp"):
    torch.manual_seed(0)
    model = getattr(module, {target!r})()
    x = torch.randint(0, 100, shape) if dtype == "int64" else torch.randn(shape)
    if strategy == "ddp":
        wrapped = DistributedDataParallel(model)
    else:
        for child in model.children():
            if any(True for _ in child.parameters()):
                fully_shard(child)
        wrapped = fully_shard(model)
    optimizer = torch.optim.AdamW(wrapped.parameters(), lr=1e-4)
    samples = []
    for index in range({warmup} + {iters}):
        started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        wrapped(x).sum().backward()
        optimizer.step()
        if index >= {warmup}:
            samples.append((time.perf_counter() - started) * 1000)
    medians[strategy] = statistics.median(samples)
    dist.barrier()
if dist.get_rank() == 0:
    print("BENCH " + json.dumps(medians), flush=True)
dist.destroy_process_group()
"""


def bare_run(target: str, shape: tuple[int, ...], dtype: str, iters: int, warmup: int) -> dict:
    script = BARE_SCRIPT.format(
        models=str(MODELS), target=target, shape=shape, dtype=dtype, iters=iters, warmup=warmup
    )
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(script)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(NPROC),
         "--standalone", "--max-restarts", "0", handle.name],
        capture_output=True, text=True, timeout=600,
    )
    wall = time.perf_counter() - started
    Path(handle.name).unlink(missing_ok=True)
    line = next((x for x in done.stdout.splitlines() if x.startswith("BENCH ")), None)
    if line is None:
        raise RuntimeError(f"bare torchrun failed: {done.stderr[-2000:]}")
    return {"wall_s": wall, "step_ms": json.loads(line[len("BENCH "):])}


def probe_run(target: str, spec: str, iters: int, warmup: int) -> dict[str, Any]:
    options = DistributedOptions(
        str(MODELS), target, nproc=NPROC, strategy="both", backend="gloo", input_spec=spec,
        iters=iters, warmup=warmup, threads=1,
    )
    started = time.perf_counter()
    info = asyncio.run(run_distributed_probe(sys.executable, options, limits=ProbeLimits()))
    wall = time.perf_counter() - started
    if info.error or len(info.strategies) != 2 or not all(r.ok for r in info.strategies):
        raise RuntimeError(f"distributed probe failed: {info.error} {info.ranks} {info.warnings}")
    rank0 = {result.strategy: result.ranks[0].step_median_ms for result in info.strategies}
    return {"wall_s": wall, "step_ms": rank0}


def run_distributed_bench(quick: bool = False) -> list[dict[str, Any]]:
    iters, warmup, rounds = (3, 1, 1) if quick else (10, 2, 3)
    rows = []
    for target, spec, dtype in CASES:
        shape = tuple(int(part) for part in spec.split(":")[0].strip("()").split(","))
        # alternated rounds, the fastest of each kept: a shared machine's noise and a cold
        # file cache on the first launch would otherwise decide the comparison
        bares, probes = [], []
        for _ in range(rounds):
            bares.append(bare_run(target, shape, dtype, iters, warmup))
            probes.append(probe_run(target, spec, iters, warmup))
        bare = min(bares, key=lambda run: run["wall_s"])
        probe = min(probes, key=lambda run: run["wall_s"])
        rows.append({"target": target, "input": spec, "iters": iters, "warmup": warmup,
                     "probe": probe, "bare": bare})
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"Distributed probe ({NPROC} ranks, gloo, CPU) against a bare torchrun script doing "
        "the same DDP and FSDP2 steps (fastest of alternated rounds)",
        "",
        "| model | input | probe wall | bare torchrun wall | overhead | DDP step probe / bare "
        "| FSDP step probe / bare |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        probe, bare = row["probe"], row["bare"]
        lines.append(
            f"| {row['target']} | {row['input']} | {probe['wall_s']:.1f} s | "
            f"{bare['wall_s']:.1f} s | {probe['wall_s'] / bare['wall_s']:.2f}x | "
            f"{probe['step_ms']['ddp']:.1f} / {bare['step_ms']['ddp']:.1f} ms | "
            f"{probe['step_ms']['fsdp']:.1f} / {bare['step_ms']['fsdp']:.1f} ms |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    arguments = parser.parse_args()
    print(markdown(run_distributed_bench(arguments.quick)))


if __name__ == "__main__":
    main()
