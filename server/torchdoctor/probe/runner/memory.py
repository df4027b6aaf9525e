"""Pass: peak memory (CUDA's allocator statistics; on the CPU, the profiler's allocations)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .inputs import ChosenInput
from .session import Session, iter_tensors


def tensor_bytes(tensors: Iterable[Any]) -> int:
    seen: set[int] = set()
    total = 0
    for tensor in tensors:
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        total += tensor.numel() * tensor.element_size()
    return total


def input_bytes(inputs: ChosenInput) -> int:
    return tensor_bytes(iter_tensors((inputs.args, inputs.kwargs)))


def cuda_memory_pass(session: Session) -> dict[str, Any]:
    import torch

    device = session.device
    session.synchronize()
    torch.cuda.reset_peak_memory_stats(device)
    baseline = torch.cuda.memory_allocated(device)
    session.step()
    session.synchronize()
    peak = torch.cuda.max_memory_allocated(device)
    return {
        "method": "cuda_allocator",
        "baseline_bytes": baseline,
        "peak_bytes": peak,
        "activation_bytes": max(peak - baseline, 0),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(device),
    }


def cpu_allocation_peak(kineto_results: Any) -> int:
    """Highest running sum of a profile's CPU allocation records (frees are negative sizes),
    in time order: the most the profiled code held at once beyond what it started with."""
    allocations: list[tuple[int, int]] = []
    stack = list(kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        extra = node.extra_fields
        if type(extra).__name__ == "_ExtraFields_Allocation" and extra.device.type == "cpu":
            allocations.append((node.start_time_ns, extra.alloc_size))
        stack.extend(node.children)
    allocations.sort()
    running = peak = 0
    for _, size in allocations:
        running += size
        peak = max(peak, running)
    return peak


def cpu_memory_from_profile(session: Session, profiler: Any) -> dict[str, Any]:
    """Peak of the running sum of the profiler's CPU allocation records over one step,
    on top of what was allocated before it (parameters, buffers, input)."""
    peak = cpu_allocation_peak(profiler.kineto_results)
    model = session.model
    baseline = (
        tensor_bytes(model.parameters()) + tensor_bytes(model.buffers())
        + input_bytes(session.inputs)
    )
    return {
        "method": "profiler_allocations",
        "baseline_bytes": baseline,
        "peak_bytes": baseline + peak,
        "activation_bytes": peak,
        "peak_reserved_bytes": None,
    }
