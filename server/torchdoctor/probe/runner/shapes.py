"""Shapes: per submodule (forward hooks, nothing else installed), every local's shape line by
line (the tracer lives in line_shapes.py), and the batch-size sweep (batch_sweep.py).
"""

from __future__ import annotations

import linecache
import os
import time
import types
from collections.abc import Callable
from typing import Any, cast

from .companions import PROBE_DIR, companion_module
from .events import ProbeFailure
from .inputs import ChosenInput
from .memory import cpu_allocation_peak, input_bytes, tensor_bytes
from .session import Session, iter_tensors, loss_of, run_forward, shapes_of
from .user_code import is_out_of_memory


def shapes_pass(session: Session) -> list[dict[str, Any]]:
    """Output shapes and inclusive forward time per submodule, from forward hooks. Autograd
    stays on, as in the timed forward, so the times are comparable."""
    model = session.model
    records: dict[int, dict[str, Any]] = {}
    starts: dict[int, list[float]] = {}
    handles = []

    def before(module: Any, _args: Any) -> None:
        session.synchronize()
        starts.setdefault(id(module), []).append(time.perf_counter())

    def after(module: Any, _args: Any, output: Any) -> None:
        session.synchronize()
        started = starts[id(module)].pop()
        record = records.setdefault(id(module), {"calls": 0, "seconds": 0.0, "shapes": None})
        record["calls"] += 1
        record["seconds"] += time.perf_counter() - started
        record["shapes"] = shapes_of(output)

    for module in model.modules():
        handles.append(module.register_forward_pre_hook(before))
        handles.append(module.register_forward_hook(after))
    try:
        # The first run pays lazy initialisation; the second is the one reported.
        for attempt in range(2):
            records.clear()
            output = session.forward()
            del output
            session.progress.stage("shapes", "output shapes per submodule", (attempt + 1) / 2)
    finally:
        for handle in handles:
            handle.remove()

    rows = []
    for name, module in model.named_modules():
        record = records.get(id(module))
        params = list(module.parameters())
        where = session.module_origin(name)
        rows.append(
            {
                "name": name,
                "type": type(module).__name__,
                "depth": 0 if not name else name.count(".") + 1,
                "output_shapes": record["shapes"] if record else None,
                "calls": record["calls"] if record else 0,
                "forward_ms": record["seconds"] * 1000 if record else None,
                "params": sum(p.numel() for p in params),
                "trainable_params": sum(p.numel() for p in params if p.requires_grad),
                "flops": None,
                "file": where[0] if where else None,
                "line": where[1] if where else None,
            }
        )
    return rows


# --------------------------------------------------------------------------------------------
# Pass: every local's shape, line by line (the tracer is line_shapes.py, next to this folder)
# --------------------------------------------------------------------------------------------


def locals_by_line_pass(session: Session) -> dict[str, Any] | None:
    try:
        return trace_locals_by_line(session)
    except ProbeFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - the rest of the report stands without it
        session.warnings.append(f"shapes by line skipped: {type(exc).__name__}: {exc}")
        return None


def trace_locals_by_line(session: Session) -> dict[str, Any]:
    import torch

    tracer = companion_module("line_shapes")
    own_folder = os.path.realpath(PROBE_DIR) + os.sep

    def is_traced(code: types.CodeType) -> bool:
        return session.user.is_user_code(code) and not os.path.realpath(
            code.co_filename
        ).startswith(own_folder)

    def source_line(file: str, line: int) -> str:
        return linecache.getline(file, line).strip()

    return cast(
        "dict[str, Any]",
        tracer.line_shapes_pass(session.forward, is_traced, torch.Tensor, source_line),
    )


def batch_sweep_pass(session: Session) -> dict[str, Any] | None:
    """Latency and peak memory per batch size (batch_sweep.py); None, with a warning, when the
    input has no batch dimension or the model fails at another size."""
    import torch

    sweep = companion_module("batch_sweep")
    request, model, inputs = session.request, session.model, session.inputs
    batched = [t for t in iter_tensors((inputs.args, inputs.kwargs)) if t.dim() >= 1]
    if not batched:
        session.warnings.append("batch sweep skipped: no input tensor has a batch dimension")
        return None
    original = batched[0].shape[0]
    state_bytes = tensor_bytes(model.parameters()) + tensor_bytes(model.buffers())

    def make_step(batch: int) -> Callable[[], None]:
        resized = ChosenInput(
            sweep.resize_batch(inputs.args, batch, original),
            sweep.resize_batch(inputs.kwargs, batch, original),
            inputs.source, inputs.detail,
        )

        def step() -> None:
            output = run_forward(model, resized)
            loss = loss_of(output)
            if loss is not None:
                loss.backward()
            del output, loss
            model.zero_grad(set_to_none=True)

        step.input_bytes = input_bytes(resized)  # type: ignore[attr-defined]  # read by peak_bytes
        return step

    def peak_bytes(step: Callable[[], None], _batch: int) -> int:
        if session.is_cuda:
            return int(sweep.cuda_peak_bytes(step, session.device))
        baseline = state_bytes + step.input_bytes  # type: ignore[attr-defined]  # see make_step
        return int(sweep.cpu_peak_bytes(step, baseline, cpu_allocation_peak))

    def release() -> None:
        if session.is_cuda:
            torch.cuda.empty_cache()

    limit = request.max_memory_bytes
    if limit is None and session.is_cuda:
        limit = torch.cuda.get_device_properties(session.device).total_memory
    plan = sweep.SweepPlan(sweep.parse_sizes(request.batch_sweep), limit)
    probes = sweep.Probes(make_step, peak_bytes, is_out_of_memory, release)
    try:
        return cast("dict[str, Any]", sweep.run_sweep(plan, probes))
    except Exception as exc:  # noqa: BLE001 - the rest of the report stands without the sweep
        session.warnings.append(f"batch sweep stopped: {type(exc).__name__}: {exc}")
        return None
