"""Batch-size sweep: forward+backward at doubling batch sizes (or the sizes asked for) until
memory or time runs out, then a binary search between the last size that fit and the first that
did not. Loaded by runner/ from the file next to it: standard library and torch only.

"Fits" means the step ran (an out-of-memory error is caught and the memory released) and its
peak memory stayed under the limit: `--max-memory`, else the GPU's memory. On the CPU the peak
is the running sum of the profiler's allocation records over one step, plus the parameters,
buffers and input, as the probe's memory pass measures it.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_BUDGET_S = 30.0
MAX_BATCH = 1 << 16
TIMED_STEPS = 3

Step = Callable[[], None]


@dataclass
class SweepPlan:
    sizes: list[int] | None  # None: 1, 2, 4, ... doubling
    limit_bytes: int | None
    budget_s: float = DEFAULT_BUDGET_S
    max_batch: int = MAX_BATCH


@dataclass
class Probes:
    """What the sweep needs from the runner: a step at a batch size, its peak memory, and how
    to tell an out-of-memory error from other failures."""

    make_step: Callable[[int], Step]
    peak_bytes: Callable[[Step, int], int]
    is_out_of_memory: Callable[[BaseException], bool]
    release: Callable[[], None]


def parse_sizes(text: str | None) -> list[int] | None:
    """"auto" (or None) → doubling; "1,2,8" → those sizes. ValueError on anything else."""
    if text is None or text.strip().lower() in ("", "auto"):
        return None
    sizes = [int(part) for part in text.replace(" ", "").split(",") if part]
    if not sizes or any(size < 1 for size in sizes):
        raise ValueError(f"batch sizes must be positive integers: {text!r}")
    return sizes


def run_sweep(
    plan: SweepPlan, probes: Probes, clock: Callable[[], float] = time.perf_counter
) -> dict[str, Any]:
    started = clock()
    points: list[dict[str, Any]] = []
    deadline = started + plan.budget_s

    def attempt(batch: int) -> dict[str, Any]:
        point = try_batch(batch, plan.limit_bytes, probes)
        points.append(point)
        return point

    last_fit: int | None = None
    first_fail: int | None = None
    stopped_by = "list" if plan.sizes is not None else "max_batch"
    for batch in plan.sizes if plan.sizes is not None else doubling(plan.max_batch):
        point = attempt(batch)
        if not point["fits"]:
            first_fail = batch
            stopped_by = "memory"
            break
        last_fit = batch if last_fit is None else max(last_fit, batch)
        if clock() > deadline:
            stopped_by = "time"
            break
    if first_fail is not None:
        low = last_fit if last_fit is not None and last_fit < first_fail else 0
        high = first_fail
        while high - low > 1 and clock() <= deadline:
            middle = (low + high) // 2
            if attempt(middle)["fits"]:
                low = middle
            else:
                high = middle
        last_fit = low or None
    fitting = [p["batch"] for p in points if p["fits"]]
    return {
        "points": points,
        "largest_fitting_batch": max(fitting) if fitting else None,
        "memory_limit_bytes": plan.limit_bytes,
        "stopped_by": stopped_by,
        "seconds": clock() - started,
    }


def doubling(limit: int) -> list[int]:
    sizes, size = [], 1
    while size <= limit:
        sizes.append(size)
        size *= 2
    return sizes


def try_batch(batch: int, limit_bytes: int | None, probes: Probes) -> dict[str, Any]:
    point: dict[str, Any] = {
        "batch": batch, "fits": False, "latency_ms": None, "samples_per_s": None,
        "peak_bytes": None, "reason": None,
    }
    try:
        step = probes.make_step(batch)
        peak = probes.peak_bytes(step, batch)
        point["peak_bytes"] = peak
        if limit_bytes is not None and peak > limit_bytes:
            point["reason"] = "over the memory limit"
            return point
        samples = []
        for _ in range(TIMED_STEPS):
            began = time.perf_counter()
            step()
            samples.append((time.perf_counter() - began) * 1000)
    except Exception as exc:  # noqa: BLE001 - only out-of-memory is an answer; the rest is raised
        if not probes.is_out_of_memory(exc):
            raise
        point["reason"] = "out of memory"
        return point
    finally:
        gc.collect()
        probes.release()
    latency = statistics.median(samples)
    point.update(
        fits=True,
        latency_ms=latency,
        samples_per_s=batch * 1000 / latency if latency > 0 else None,
    )
    return point


# --------------------------------------------------------------------------------------------
# Torch pieces the runner hands in
# --------------------------------------------------------------------------------------------


def resize_batch(value: Any, batch: int, original: int) -> Any:
    """Every tensor whose first dimension is the input's batch, grown or cut to `batch` rows by
    repeating its own rows (token ids stay valid ids, masks stay masks)."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.dim() >= 1 and value.shape[0] == original:
            rows = torch.arange(batch, device=value.device) % original
            return value.index_select(0, rows)
        return value
    if isinstance(value, tuple):
        return tuple(resize_batch(item, batch, original) for item in value)
    if isinstance(value, list):
        return [resize_batch(item, batch, original) for item in value]
    if isinstance(value, dict):
        return {key: resize_batch(item, batch, original) for key, item in value.items()}
    return value


def cpu_peak_bytes(step: Step, baseline: int, allocation_peak: Callable[[Any], int]) -> int:
    """`baseline` + the highest running sum of CPU allocations during one step
    (`allocation_peak`: the runner's reading of a profile's allocation records)."""
    from torch.autograd.profiler import profile

    with profile(use_kineto=True, profile_memory=True) as profiler:
        step()
    return baseline + allocation_peak(profiler.kineto_results)


def cuda_peak_bytes(step: Step, device: Any) -> int:
    import torch

    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    step()
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device))
