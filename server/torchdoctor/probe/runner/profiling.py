"""Pass: one profiled step (top operators, time and memory per source line)."""

from __future__ import annotations

import linecache
import sys
import time
from collections.abc import Iterator
from typing import Any, cast

from .checks import PASSTHROUGH_NAMES
from .memory import cpu_memory_from_profile
from .session import Session
from .user_code import Frame, Location

TOP_OPS = 15


ANNOTATION_PREFIX = "torchdoctor#"


def make_annotate_mode(session: Session, stacks: list[tuple[Frame, ...]]) -> Any:
    from torch.autograd.profiler import record_function
    from torch.overrides import TorchFunctionMode

    user = session.user
    index_of: dict[tuple[Frame, ...], int] = {}

    class AnnotateMode(TorchFunctionMode):
        """Wraps each torch call made by user code in a profiler range named after its user
        call stack, so ops (and, through autograd sequence numbers, their backward) can be
        charged to the exact calling lines. with_stack alone gives function *def* lines."""

        def __torch_function__(
            self, func: Any, types_: Any, args: tuple[Any, ...] = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            if getattr(func, "__name__", "") in PASSTHROUGH_NAMES:
                return func(*args, **kwargs)
            stack = user.stack(sys._getframe(1))
            if not stack:
                return func(*args, **kwargs)
            index = index_of.get(stack)
            if index is None:
                index = index_of[stack] = len(stacks)
                stacks.append(stack)
            with record_function(f"{ANNOTATION_PREFIX}{index}"):
                return func(*args, **kwargs)

    return AnnotateMode()


def descendants(event: Any) -> Iterator[Any]:
    pending = list(event.cpu_children)
    while pending:
        child = pending.pop()
        yield child
        pending.extend(child.cpu_children)


def profile_pass(session: Session) -> dict[str, Any]:
    from torch.autograd.profiler import profile

    stacks: list[tuple[Frame, ...]] = []
    mode = make_annotate_mode(session, stacks)
    use_device = "cuda" if session.is_cuda else None
    session.synchronize()
    started = time.perf_counter()
    with profile(use_kineto=True, profile_memory=True, use_device=use_device) as profiler:
        with mode:
            output = session.forward()
        if session.can_backward:
            session.backward(output)
        del output
        session.synchronize()
    step_ms = (time.perf_counter() - started) * 1000
    session.model.zero_grad(set_to_none=True)
    session.progress.stage("profile", "reading the profile", 0.5)

    memory = None if session.is_cuda else cpu_memory_from_profile(session, profiler)
    lines = lines_from_events(session, profiler.function_events, stacks)
    top_ops, op_total_ms = top_operators(profiler, session.is_cuda)
    return {
        "profiled_step_ms": step_ms,
        "op_total_ms": op_total_ms,
        "top_ops": top_ops,
        "lines": lines,
        "memory": memory,
    }


def lines_from_events(
    session: Session, events: Any, stacks: list[tuple[Frame, ...]]
) -> list[dict[str, Any]]:
    """Forward time/memory of each user line (inclusive of the lines it calls into) and the
    backward time of the autograd nodes its ops created (tied by sequence number)."""
    rows: dict[Location, dict[str, Any]] = {}
    stack_of_sequence: dict[int, int] = {}
    use_device = session.is_cuda

    def row_for(frame: Frame) -> dict[str, Any]:
        file, line, function = frame
        row = rows.get((file, line))
        if row is None:
            row = rows[(file, line)] = {
                "file": file,
                "line": line,
                "function": function,
                "code": linecache.getline(file, line).strip(),
                "calls": 0,
                "forward_ms": 0.0,
                "backward_ms": 0.0,
                "self_ms": 0.0,
                "device_ms": 0.0 if use_device else None,
                "net_alloc_bytes": 0,
                "output_shape": None,
            }
        return row

    def charge(index: int, ms: float, device_ms: float, phase: str, net_bytes: int) -> None:
        stack = stacks[index]
        for position, frame in enumerate(dict.fromkeys((f[0], f[1], f[2]) for f in stack)):
            row = row_for(frame)
            row[f"{phase}_ms"] += ms
            if use_device:
                row["device_ms"] += device_ms
            if phase == "forward":
                row["net_alloc_bytes"] += net_bytes
            if position == 0:
                row["self_ms"] += ms
                if phase == "forward":
                    row["calls"] += 1

    for event in events:
        if not event.name.startswith(ANNOTATION_PREFIX):
            continue
        index = int(event.name[len(ANNOTATION_PREFIX) :])
        for child in descendants(event):
            if child.sequence_nr >= 0:
                stack_of_sequence.setdefault(child.sequence_nr, index)
        net = event.device_memory_usage if use_device else event.cpu_memory_usage
        charge(
            index, event.cpu_time_total / 1000, event.device_time_total / 1000, "forward", net
        )
    for event in events:
        if not event.name.startswith("autograd::engine::evaluate_function"):
            continue
        forward_index = stack_of_sequence.get(event.sequence_nr)
        if forward_index is not None:
            cpu_ms, device_ms = event.cpu_time_total / 1000, event.device_time_total / 1000
            charge(forward_index, cpu_ms, device_ms, "backward", 0)
    # Share of the step's attributed time (host time on CPU, kernel time on CUDA): the
    # outermost line of forward is close to 1, a line inside it gets its part.
    step_total = 0.0
    for event in events:
        is_root = event.cpu_parent is None
        if is_root and event.name.startswith((ANNOTATION_PREFIX, "autograd::engine::")):
            step_total += event.device_time_total if use_device else event.cpu_time_total
    for row in rows.values():
        spent = row["device_ms"] if use_device else row["forward_ms"] + row["backward_ms"]
        row["share"] = spent * 1000 / step_total if step_total > 0 else None
    return sorted(rows.values(), key=lambda r: (r["file"], r["line"]))


def top_operators(profiler: Any, is_cuda: bool) -> tuple[list[dict[str, Any]], float]:
    averages = [
        a
        for a in profiler.key_averages()
        if not a.key.startswith(ANNOTATION_PREFIX) and not a.key.startswith("[memory]")
    ]
    total_self_us = sum(a.self_cpu_time_total for a in averages)
    total_device_us = sum(a.self_device_time_total for a in averages) if is_cuda else 0.0

    def sort_key(a: Any) -> float:
        return cast(float, a.self_device_time_total if is_cuda else a.self_cpu_time_total)

    rows = []
    for average in sorted(averages, key=sort_key, reverse=True)[:TOP_OPS]:
        share_base = total_device_us if is_cuda else total_self_us
        rows.append(
            {
                "name": average.key,
                "calls": average.count,
                "self_ms": average.self_cpu_time_total / 1000,
                "total_ms": average.cpu_time_total / 1000,
                "self_device_ms": average.self_device_time_total / 1000 if is_cuda else None,
                "share": sort_key(average) / share_base if share_base > 0 else None,
            }
        )
    return rows, (total_device_us if is_cuda else total_self_us) / 1000
