"""One probe, start to finish: device, model, input and precision, then every pass in turn,
each pass's failure kept apart from the others.
"""

from __future__ import annotations

import contextlib
import os
import platform
from typing import Any

from .checks import checks_going_on_forward_only
from .companions import companion_module
from .distributed import distributed_recommendation
from .events import ProbeFailure, Progress
from .flops import flops_pass, module_flops_by_name
from .graph_breaks import explain_pass
from .inputs import ChosenInput, choose_input
from .loading import OriginRecorder, build_model, import_user_file, resolve_target
from .memory import cuda_memory_pass, tensor_bytes
from .profiling import profile_pass
from .request import ProbeRequest
from .session import Session, follow_precision, iter_tensors, shapes_of
from .shapes import batch_sweep_pass, locals_by_line_pass, shapes_pass
from .timing import timing_pass
from .user_code import Location, UserCode, user_code_phase

SCHEMA_VERSION = 1


def pick_device(requested: str) -> Any:
    import torch

    if requested == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    if requested == "cuda":
        raise ProbeFailure(
            "device",
            f"--device cuda, but torch.cuda.is_available() is False here (torch "
            f"{torch.__version__}, built with CUDA {torch.version.cuda or 'none'})",
        )
    return torch.device("cpu")


def cpu_name() -> str:
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "CPU"


def device_info(device: Any) -> dict[str, Any]:
    import torch

    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {
            "kind": "cuda",
            "name": torch.cuda.get_device_name(device),
            "index": device.index,
            "total_memory_bytes": props.total_memory,
            "capability": f"{props.major}.{props.minor}",
            "threads": torch.get_num_threads(),
        }
    total = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "kind": "cpu",
        "name": cpu_name(),
        "index": None,
        "total_memory_bytes": total,
        "capability": None,
        "threads": torch.get_num_threads(),
    }


def param_info(model: Any) -> dict[str, Any]:
    params = list(dict.fromkeys(model.parameters()))
    return {
        "total": sum(p.numel() for p in params),
        "trainable": sum(p.numel() for p in params if p.requires_grad),
        "parameter_bytes": tensor_bytes(params),
        "buffer_bytes": tensor_bytes(model.buffers()),
    }


def input_info(inputs: ChosenInput) -> dict[str, Any]:
    tensors = []

    def collect(value: Any, path: str) -> None:
        import torch

        if isinstance(value, torch.Tensor):
            tensors.append(
                {"path": path, "shape": list(value.shape),
                 "dtype": str(value.dtype).removeprefix("torch.")}
            )
        elif isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                collect(item, f"{path}[{i}]")
        elif isinstance(value, dict):
            for key, item in value.items():
                collect(item, f"{path}[{key!r}]")

    collect(inputs.args, "args")
    collect(inputs.kwargs, "kwargs")
    return {
        "source": inputs.source,
        "detail": inputs.detail,
        "spec": inputs.spec,
        "tensors": tensors,
    }


def merge_line_shapes(lines: list[dict[str, Any]], shapes: dict[Location, list[int]]) -> None:
    by_location = {(row["file"], row["line"]): row for row in lines}
    for location, shape in shapes.items():
        row = by_location.get(location)
        if row is not None:
            row["output_shape"] = shape


def apply_precision(
    request: ProbeRequest, model: Any, inputs: ChosenInput, device: Any, user: UserCode
) -> tuple[ChosenInput, Any]:
    """--dtype / --amp / --channels-last (precision.py): the model and inputs converted, and
    the plan every forward and backward of this probe follows from now on."""
    precision = companion_module("precision")
    given: list[str] = []
    if inputs.source in ("argument", "comment"):
        for tensor in iter_tensors((inputs.args, inputs.kwargs)):
            if tensor.is_floating_point():
                given.append(str(tensor.dtype).removeprefix("torch."))
    plan = precision.plan_precision(
        request.dtype, request.amp, request.channels_last, device, given
    )
    with user_code_phase("init", f"converting {request.target} ({plan.dtype})", user):
        precision.convert_model(model, plan)
    converted = ChosenInput(
        precision.convert_inputs(inputs.args, plan),
        precision.convert_inputs(inputs.kwargs, plan),
        inputs.source, inputs.detail, inputs.spec,
    )
    follow_precision(plan)
    return converted, plan


def probe(request: ProbeRequest, progress: Progress) -> dict[str, Any]:
    import torch

    path = request.file
    if not os.path.isfile(path):
        raise ProbeFailure("file", f"no such file: {path}", path)
    user = UserCode()
    device = pick_device(request.device)

    limit_note = apply_memory_limit(request.memory_limit_bytes, device)
    progress.stage("load", f"importing {os.path.basename(request.origin or path)}")
    module = import_user_file(path, user, request.origin)
    progress.stage("build", f"building {request.target}")
    target_obj = resolve_target(module, request.target, path)
    origins = OriginRecorder(user)
    model, construction = build_model(
        target_obj, request.target, path, user, origins, request.init, request.factory
    )
    model.train()

    progress.stage("input", "choosing an example input")
    torch.manual_seed(0)
    inputs = choose_input(model, module, path, request.input, user)
    with user_code_phase("init", f"moving {request.target} to {device}", user):
        model.to(device)
    inputs = inputs.to(device)
    inputs, precision_plan = apply_precision(request, model, inputs, device, user)

    session = Session(request, model, inputs, device, user, origins, progress)
    if limit_note:
        session.warnings.append(limit_note)
    # what the passes measure is kept as they go: a later failure still reports it
    outcomes = progress.outcomes = companion_module("pass_outcomes").PassOutcomes()
    outcomes.keep(
        schema=SCHEMA_VERSION, file=path, target=request.target,
        torch_version=torch.__version__, python_version=platform.python_version(),
        device=device_info(device), input=input_info(inputs), params=param_info(model),
    )
    progress.stage("shapes", "output shapes per submodule")
    strays = companion_module("unregistered_modules").StrayModules(model, torch)
    try:
        with strays.watching(session.synchronize, shapes_of):
            modules = shapes_pass(session)
    except ProbeFailure as failure:
        # modules kept in a plain list stay where they were built: on a GPU the forward
        # fails mixing devices, and the error says which container is why
        behind = strays.left_behind(
            device, origins.sites.container_sites, lambda stray: origins.modules.get(id(stray))
        )
        if behind:
            failure.message += "; " + "; ".join(
                f"{finding['message']} (line {finding['line']})" for finding in behind
            )
            outcomes.keep(findings=behind)
        raise
    modules += strays.rows(lambda stray: origins.modules.get(id(stray)))
    outcomes.keep(modules=modules)
    progress.stage("shapes", "shapes of every local, line by line", 1.0)
    locals_by_line = locals_by_line_pass(session)
    progress.stage("checks", "runtime checks")
    findings, line_shapes = checks_going_on_forward_only(session, outcomes)
    findings += strays.findings(
        origins.sites.container_sites, lambda stray: origins.modules.get(id(stray))
    )
    findings += origins.sites.float64_attribute_findings(model, torch)
    outcomes.keep(findings=findings)
    progress.stage("flops", "counting FLOPs")
    flops_forward, flops_total, per_module = flops_pass(session)
    module_flops = module_flops_by_name(per_module, type(model).__name__)
    for row in modules:
        row["flops"] = module_flops.get(row["name"])
    outcomes.keep(flops={"forward": flops_forward, "forward_backward": flops_total})
    progress.stage("timing", "timing")
    latency = timing_pass(session)
    outcomes.keep(latency=latency)
    memory = None
    if session.is_cuda:
        progress.stage("memory", "peak memory")
        memory = cuda_memory_pass(session)
        outcomes.keep(memory=memory)
    progress.stage("profile", "profiling one step")
    profiled = profile_pass(session)
    memory = memory or profiled["memory"]
    merge_line_shapes(profiled["lines"], line_shapes)
    batch_sweep = None
    if request.batch_sweep is not None:
        progress.stage("sweep", "batch-size sweep: forward+backward at growing batches")
        batch_sweep = batch_sweep_pass(session)
    graph_breaks = None
    if request.explain:
        progress.stage("explain", "looking for graph breaks (torch._dynamo.explain)")
        graph_breaks = explain_pass(session)
    progress.stage("report", "writing the report")

    params = param_info(model)
    info = device_info(device)
    memory_total = info["total_memory_bytes"] if info["kind"] == "cuda" else None
    frozen_bytes = tensor_bytes(p for p in model.parameters() if not p.requires_grad)
    origins.release()
    return {
        "schema": SCHEMA_VERSION,
        "file": path,
        "target": request.target,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "device": info,
        "input": input_info(inputs),
        "params": params,
        "modules": modules,
        "latency": latency,
        "memory": memory,
        "flops": {
            "forward": flops_forward,
            "forward_backward": flops_total,
            "counter": "torch.utils.flop_counter.FlopCounterMode",
        },
        "top_ops": profiled["top_ops"],
        "lines": profiled["lines"],
        "profiled_step_ms": profiled["profiled_step_ms"],
        "op_total_ms": profiled["op_total_ms"],
        "findings": findings,
        "line_shapes": locals_by_line,
        "batch_sweep": batch_sweep,
        "graph_breaks": graph_breaks,
        "recommendation": distributed_recommendation(
            params, frozen_bytes, memory["activation_bytes"], memory_total,
            session.unused_parameters,
        ),
        "warnings": session.warnings,
        "construction": construction,
        "precision": precision_plan.report(model),
        "failed_passes": outcomes.failed_rows(),
        "stage_seconds": progress.finish(),
    }


def apply_memory_limit(limit: int | None, device: Any) -> str | None:
    """RLIMIT_AS for this probe's child on the CPU; a note when it is not applied. The CUDA
    driver reserves far more address space than it uses, so a GPU probe runs without it."""
    if not limit:
        return None
    if device.type == "cuda":
        return "the memory limit is not applied on CUDA (the driver reserves more address space)"
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, ValueError, OSError) as exc:
        return f"the memory limit could not be applied: {exc}"
    return None
