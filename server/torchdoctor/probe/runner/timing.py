"""Pass: timing (bare model, warm-up then N iterations)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from .session import Session, loss_of, run_forward
from .user_code import user_code_phase


def summarize(samples_ms: list[float], warmup: int) -> dict[str, Any]:
    ordered = sorted(samples_ms)
    if len(ordered) >= 4:
        quartiles = statistics.quantiles(ordered, n=4)
        iqr = quartiles[2] - quartiles[0]
    else:
        iqr = ordered[-1] - ordered[0]
    return {
        "iterations": len(ordered),
        "warmup": warmup,
        "median_ms": statistics.median(ordered),
        "min_ms": ordered[0],
        "max_ms": ordered[-1],
        "iqr_ms": iqr,
    }


def measure(
    session: Session, step: Callable[[], None], label: str, share: tuple[float, float]
) -> dict[str, Any]:
    """Time `step` `iters` times after warm-up, stopping early once the time budget is spent
    (at least 3 timed iterations). CUDA: events around each step, one sync at the end."""
    import torch

    request = session.request
    low, high = share
    for i in range(request.warmup):
        step()
        session.progress.stage("timing", f"{label}: warm-up {i + 1}/{request.warmup}", low)
    session.synchronize()
    samples: list[float] = []
    events: list[tuple[Any, Any]] = []
    started = time.perf_counter()
    for i in range(request.iters):
        if session.is_cuda:
            begin = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]  # unannotated in torch
            end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]  # unannotated in torch
            begin.record()
            step()
            end.record()
            events.append((begin, end))
        else:
            t0 = time.perf_counter()
            step()
            samples.append((time.perf_counter() - t0) * 1000)
        fraction = low + (high - low) * (i + 1) / request.iters
        session.progress.stage("timing", f"{label}: {i + 1}/{request.iters}", fraction)
        spent = time.perf_counter() - started
        if i + 1 >= min(3, request.iters) and spent > request.timing_budget_s:
            break
    if session.is_cuda:
        session.synchronize()
        samples = [begin.elapsed_time(end) for begin, end in events]
    return summarize(samples, request.warmup)


def timing_pass(session: Session) -> dict[str, Any]:
    import torch

    model = session.model

    def forward_only() -> None:
        # Same state as the training step (train mode, autograd on), so that
        # forward_backward - forward is the cost of backward.
        output = run_forward(model, session.inputs)
        del output

    def training_step() -> None:
        output = run_forward(model, session.inputs)
        loss = loss_of(output)
        loss.backward()
        model.zero_grad(set_to_none=True)

    with user_code_phase("forward", f"{type(model).__name__}.forward raised", session.user):
        forward = measure(session, forward_only, "forward", (0.0, 0.4))
        both = None
        if session.can_backward:
            both = measure(session, training_step, "forward+backward", (0.4, 1.0))
    return {
        "method": "cuda_events" if session.is_cuda else "perf_counter",
        "mode": "train" if model.training else "eval",
        "grad_enabled": torch.is_grad_enabled(),
        "forward": forward,
        "forward_backward": both,
    }
