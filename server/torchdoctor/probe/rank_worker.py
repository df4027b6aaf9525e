"""What each rank runs under torchrun: the user's model wrapped in DDP and/or FSDP2, trained for
a few steps, measured, and written to a JSON file per rank.

Like the runner this file runs in the user's interpreter and imports only the standard library,
torch and the runner package (runner/, loaded by path from next to this file, for its user-code
functions: importing the model, building it, choosing its input). It needs nothing from the
launcher but what torchrun puts in the environment (RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR...), so the same command works on one host or on many:

    torchrun --nproc-per-node 2 --standalone rank_worker.py --file model.py --target Net \\
        --strategy both --backend gloo --out RESULTS_DIR

Files written in RESULTS_DIR (each atomically):
    rank_<r>.start.json   pid, host and local rank, as soon as the rank starts
    rank_<r>.json         the rank's measurements per strategy, or the error that stopped it
    rank_<r>.stack        faulthandler dumps (watchdog on a stuck step, SIGUSR1, SIGTERM from
                          torchrun tearing the job down, fatal signals such as gloo's abort)
    ranks.json            written by global rank 0 when every rank finished: all ranks' records
                          gathered over the process group (the one file to read on multi-node)
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import faulthandler
import importlib.util
import json
import math
import os
import re
import signal
import socket
import sys
import time
import traceback
import types
from collections.abc import Iterator
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
STRATEGIES = ("ddp", "fsdp")
BACKENDS = ("gloo", "nccl")
PR_SET_PDEATHSIG = 1
# A step that has not finished after this share of the collective time-out gets its stack
# dumped, before the time-out itself ends the job: the dump shows where each rank waits.
WATCHDOG_SHARE = 0.5
COLLECTIVE_PREFIXES = ("gloo:", "nccl:")
NCCL_KERNEL = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)")
NCCL_KINDS = {
    "AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast", "Reduce": "reduce", "SendRecv": "send_recv",
}
# Words in an exception that say a collective failed rather than the model's own code.
COLLECTIVE_FAILURE = re.compile(
    r"timed out|timeout|collective mismatch|connection (?:reset|closed)|DistBackendError|"
    r"NCCL error|Received data size doesn't match",
    re.IGNORECASE,
)


def load_runner() -> types.ModuleType:
    """The runner package (runner/ next to this file) under a private name, as its __main__.py
    loads it: a user's own `runner` or `timing` module must not shadow it."""
    name = "torchdoctor_probe_runner"
    if name in sys.modules:
        return sys.modules[name]
    folder = os.path.join(HERE, "runner")
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder]
    )
    if spec is None or spec.loader is None:
        raise ImportError("the runner folder is missing next to rank_worker.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def json_safe(value: Any) -> Any:
    """JSON has no NaN or Infinity: a measurement that is not finite becomes null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_json(path: str, data: Any) -> None:
    """Atomically: a reader never sees half a file."""
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as stream:
        json.dump(json_safe(data), stream, allow_nan=False, default=str)
    os.replace(temporary, path)


def set_parent_death_signal() -> None:
    """Die with the torchrun process that started this rank: no rank outlives its job."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="rank_worker.py")
    parser.add_argument("--file", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--input")
    parser.add_argument("--origin")
    parser.add_argument("--strategy", choices=(*STRATEGIES, "both"), default="both")
    parser.add_argument("--backend", choices=BACKENDS, default="gloo")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--collective-timeout", type=float, default=60.0)
    parser.add_argument("--memory-limit", type=int, help="RLIMIT_AS per rank, bytes (CPU)")
    parser.add_argument("--out", required=True, help="folder for the per-rank result files")
    return parser.parse_args(argv)


class RankContext:
    """Who this rank is, from torchrun's environment."""

    def __init__(self, backend: str) -> None:
        import torch

        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.backend = backend
        if backend == "nccl":
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
        else:
            self.device = torch.device("cpu")

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def synchronize(self) -> None:
        if self.is_cuda:
            import torch

            torch.cuda.synchronize(self.device)


def user_code_for(runner: types.ModuleType) -> Any:
    """runner.UserCode that also treats this file as library code, not the user's."""

    class RankUserCode(runner.UserCode):  # type: ignore[name-defined, misc]  # loaded by path
        def _classify(self, filename: str) -> bool:
            if filename and os.path.realpath(filename).startswith(os.path.realpath(HERE) + os.sep):
                return False
            return bool(super()._classify(filename))

    return RankUserCode()


@contextlib.contextmanager
def watchdog(seconds: float, stack_file: Any) -> Iterator[None]:
    """Dump every thread's stack if the block is still running after `seconds`."""
    faulthandler.dump_traceback_later(seconds, repeat=False, file=stack_file)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def tensor_local_bytes(tensor: Any) -> int:
    """Bytes this rank holds of a tensor: its shard for an FSDP2 DTensor."""
    local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
    return int(local.numel() * local.element_size())


def optimizer_state_bytes(optimizer: Any) -> int:
    import torch

    return sum(
        tensor_local_bytes(value)
        for state in optimizer.state.values()
        for value in state.values()
        if isinstance(value, torch.Tensor)
    )


def unused_parameter_places(
    model: Any, origins: Any, inputs: Any, runner: types.ModuleType
) -> list[dict[str, Any]]:
    """Parameters with no gradient after one local backward (no process group involved), each
    with the line that declared it: what DDP's reducer would find unused on this rank."""
    output = runner.run_forward(model, inputs)
    loss = runner.loss_of(output)
    if loss is None:
        return []
    loss.backward()
    modules = dict(model.named_modules())
    places = []
    for name, param in model.named_parameters():
        if param.requires_grad and param.grad is None:
            where = origins.params.get(id(param))
            if where is None:
                owner = modules.get(name.rpartition(".")[0])
                where = origins.modules.get(id(owner)) if owner is not None else None
            places.append({
                "name": name,
                "file": where[0] if where else None,
                "line": where[1] if where else None,
            })
    model.zero_grad(set_to_none=True)
    return places


def wrap(model: Any, strategy: str, context: RankContext, find_unused: bool) -> Any:
    """DDP, or FSDP2's fully_shard on every top-level block that holds parameters and then on
    the root (the layout torch's own examples use)."""
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        device_ids = [context.local_rank] if context.is_cuda else None
        return DistributedDataParallel(
            model, device_ids=device_ids, find_unused_parameters=find_unused
        )
    from torch.distributed.fsdp import fully_shard

    for child in model.children():
        if any(True for _ in child.parameters()):
            fully_shard(child)
    fully_shard(model)
    return model


def collectives_from_profile(
    profiler: Any, element_bytes: int, is_cuda: bool
) -> list[dict[str, Any]]:
    """Per collective kind: calls, milliseconds and payload bytes in one profiled step. On CPU
    the backend's own events (`gloo:all_reduce`, run on its communication threads) carry the
    time and the tensor sizes; on CUDA the NCCL kernels carry the time."""
    kinds: dict[str, dict[str, Any]] = {}

    def entry(kind: str) -> dict[str, Any]:
        return kinds.setdefault(kind, {"kind": kind, "calls": 0, "ms": 0.0, "bytes": 0})

    for event in profiler.events():
        name = event.name
        if name.startswith(COLLECTIVE_PREFIXES):
            record = entry(name.split(":", 1)[1])
            record["calls"] += 1
            shapes = event.input_shapes or []
            record["bytes"] += sum(
                element_bytes * _numel(shape) for shape in shapes if isinstance(shape, list)
            )
            if not is_cuda:
                record["ms"] += event.cpu_time_total / 1000.0
        elif is_cuda:
            match = NCCL_KERNEL.search(name)
            if match and getattr(event, "device_time_total", None):
                record = entry(NCCL_KINDS.get(match.group(1), match.group(1)))
                record["ms"] += event.device_time_total / 1000.0
    return sorted(kinds.values(), key=lambda row: row["ms"], reverse=True)


def _numel(shape: list[Any]) -> int:
    count = 1
    for size in shape:
        if not isinstance(size, int):
            return 0
        count *= size
    return count


class StrategyRun:
    """One strategy on this rank: build, wrap, warm up, time, profile."""

    def __init__(
        self,
        strategy: str,
        arguments: argparse.Namespace,
        context: RankContext,
        runner: types.ModuleType,
        user: Any,
        module: types.ModuleType,
        stack_file: Any,
    ) -> None:
        self.strategy = strategy
        self.arguments = arguments
        self.context = context
        self.runner = runner
        self.user = user
        self.module = module
        self.stack_file = stack_file

    def run(self) -> dict[str, Any]:
        import torch

        runner, user, arguments, context = self.runner, self.user, self.arguments, self.context
        path = arguments.file
        target = runner.resolve_target(self.module, arguments.target, path)
        origins = runner.OriginRecorder(user)
        # build_model seeds torch: every rank starts from the same weights
        built = runner.build_model(target, arguments.target, path, user, origins)
        model = built[0] if isinstance(built, tuple) else built  # (model, how it was built)
        model.train()
        torch.manual_seed(1000 + context.rank)  # each rank its own batch, as a sampler gives
        inputs = runner.choose_input(model, self.module, path, arguments.input, user)
        with runner.user_code_phase("init", f"moving {arguments.target} to {context.device}", user):
            model.to(context.device)
        inputs = inputs.to(context.device)
        total_params = sum(p.numel() for p in model.parameters())
        full_param_bytes = runner.tensor_bytes(model.parameters())
        unused: list[dict[str, Any]] = []
        if self.strategy == "ddp":
            with runner.user_code_phase("backward", "a local forward and backward", user):
                unused = unused_parameter_places(model, origins, inputs, runner)
        origins.release()
        with runner.user_code_phase("init", f"wrapping in {self.strategy.upper()}", user):
            wrapped = wrap(model, self.strategy, context, find_unused=bool(unused))
        optimizer = torch.optim.AdamW(wrapped.parameters(), lr=1e-4)
        shapes: list[list[int]] = []

        def step() -> None:
            optimizer.zero_grad(set_to_none=True)
            output = runner.run_forward(wrapped, inputs)
            shapes[:] = runner.shapes_of(output)
            loss = runner.loss_of(output)
            if loss is not None:
                loss.backward()
            optimizer.step()
            context.synchronize()

        limit = arguments.collective_timeout * WATCHDOG_SHARE
        samples: list[float] = []
        with runner.user_code_phase("forward", f"a {self.strategy.upper()} training step", user):
            for index in range(arguments.warmup + arguments.iters):
                started = time.perf_counter()
                with watchdog(limit, self.stack_file):
                    step()
                if index >= arguments.warmup:
                    samples.append((time.perf_counter() - started) * 1000.0)
            memory, collectives, profiled_ms = self.profiled_step(wrapped, optimizer, step, limit)
        params = list(wrapped.parameters())
        step_stats = runner.summarize(samples, arguments.warmup)
        comm_ms = sum(row["ms"] for row in collectives)
        return {
            "strategy": self.strategy,
            "ok": True,
            "error": None,
            "step": step_stats,
            "profiled_step_ms": profiled_ms,
            "collectives": collectives,
            "comm_ms": comm_ms,
            "comm_share": min(comm_ms / profiled_ms, 1.0) if profiled_ms > 0 else None,
            "bytes_per_step": sum(row["bytes"] for row in collectives),
            **memory,
            "total_params": total_params,
            "full_param_bytes": full_param_bytes,
            "param_bytes": sum(tensor_local_bytes(p) for p in params),
            "grad_bytes": sum(tensor_local_bytes(p.grad) for p in params if p.grad is not None),
            "optimizer_state_bytes": optimizer_state_bytes(optimizer),
            "output_shapes": shapes,
            "find_unused_parameters": bool(unused),
            "unused_parameters": unused,
        }

    def profiled_step(
        self, wrapped: Any, optimizer: Any, step: Any, limit: float
    ) -> tuple[dict[str, Any], list[dict[str, Any]], float]:
        import torch
        from torch.profiler import ProfilerActivity, profile

        context = self.context
        element_bytes = next(
            (p.element_size() for p in wrapped.parameters() if p.is_floating_point()), 4
        )
        activities = [ProfilerActivity.CPU]
        if context.is_cuda:
            activities.append(ProfilerActivity.CUDA)
            torch.cuda.reset_peak_memory_stats(context.device)
        baseline = (
            sum(tensor_local_bytes(p) for p in wrapped.parameters())
            + sum(tensor_local_bytes(b) for b in wrapped.buffers())
            + optimizer_state_bytes(optimizer)
        )
        with profile(
            activities=activities, record_shapes=True, profile_memory=not context.is_cuda
        ) as profiler, watchdog(limit, self.stack_file):
            started = time.perf_counter()
            step()
            elapsed_ms = (time.perf_counter() - started) * 1000.0
        if context.is_cuda:
            memory = {
                "memory_method": "cuda_allocator",
                "peak_memory_bytes": int(torch.cuda.max_memory_allocated(context.device)),
            }
        else:
            memory = {
                "memory_method": "profiler_allocations",
                "peak_memory_bytes": baseline
                + self.runner.cpu_allocation_peak(profiler.profiler.kineto_results),
            }
        collectives = collectives_from_profile(profiler, element_bytes, context.is_cuda)
        return memory, collectives, elapsed_ms


def error_record(exc: BaseException, strategy: str | None, user: Any, path: str) -> dict[str, Any]:
    """What stopped this rank, with the user's frames of the traceback, innermost first."""
    kind = getattr(exc, "kind", None) or "internal"
    message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
    trace = getattr(exc, "trace", None) or "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__)
    )
    cause = exc.__cause__ or exc.__context__
    text = f"{message}\n{trace}\n{cause!r}"
    if COLLECTIVE_FAILURE.search(text):
        kind = "collective"
    frames: list[dict[str, Any]] = []
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if user is not None and user.is_user_code(code):
            frames.append(
                {"file": code.co_filename, "line": tb.tb_lineno, "function": code.co_name}
            )
        tb = tb.tb_next
    if not frames:
        frames = frames_from_trace(trace, user)
    frames.reverse()
    return {
        "strategy": strategy,
        "kind": kind,
        "message": message.strip().splitlines()[0][:2000] if message.strip() else kind,
        "file": frames[0]["file"] if frames else getattr(exc, "file", None),
        "line": frames[0]["line"] if frames else getattr(exc, "line", None),
        "stack": frames,
        "traceback": trace[-6000:],
    }


_TRACE_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')


def frames_from_trace(trace: str, user: Any) -> list[dict[str, Any]]:
    """User frames of a formatted traceback (a ProbeFailure keeps only the text), outermost
    first like the traceback itself."""
    found = []
    for match in _TRACE_FRAME.finditer(trace):
        if user is not None and user.is_user_file(match.group("file")):
            found.append({
                "file": match.group("file"),
                "line": int(match.group("line")),
                "function": match.group("function"),
            })
    return found


def apply_memory_limit(limit: int | None, context: RankContext) -> None:
    if not limit or context.is_cuda:
        return
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main(argv: list[str] | None = None) -> int:
    set_parent_death_signal()
    # Started as a script, Python put this folder first on sys.path: the user's `import
    # schema` must not find the files next to this one.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
    arguments = parse_arguments(sys.argv[1:] if argv is None else argv)
    rank = int(os.environ.get("RANK", "0"))
    out = arguments.out
    os.makedirs(out, exist_ok=True)  # on a cluster each node may start from nothing
    base = os.path.join(out, f"rank_{rank}")
    stack_file = open(f"{base}.stack", "a", encoding="utf-8")  # noqa: SIM115 - open until exit
    faulthandler.enable(file=stack_file, all_threads=True)
    for name in ("SIGUSR1", "SIGTERM"):
        number = getattr(signal, name, None)
        if number is not None:
            # SIGTERM is how torchrun stops the other ranks when one fails: dump, then die
            chain = name == "SIGTERM"
            faulthandler.register(number, file=stack_file, all_threads=True, chain=chain)
    write_json(f"{base}.start.json", {
        "rank": rank,
        "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
        "world_size": int(os.environ.get("WORLD_SIZE", "1")),
        "pid": os.getpid(),
        "host": socket.gethostname(),
    })
    record: dict[str, Any] = {
        "rank": rank, "pid": os.getpid(), "host": socket.gethostname(), "runs": [], "error": None,
    }
    code = run_rank(arguments, record, base, stack_file)
    stack_file.flush()
    return code


def run_rank(
    arguments: argparse.Namespace, record: dict[str, Any], base: str, stack_file: Any
) -> int:
    user = None
    strategy: str | None = None
    try:
        import torch
        import torch.distributed as dist

        runner = load_runner()
        context = RankContext(arguments.backend)
        record.update(local_rank=context.local_rank, world_size=context.world_size,
                      device=str(context.device), torch_version=torch.__version__)
        if context.is_cuda:
            properties = torch.cuda.get_device_properties(context.device)
            record["device_memory_bytes"] = int(properties.total_memory)
        if arguments.threads:
            torch.set_num_threads(arguments.threads)
        apply_memory_limit(arguments.memory_limit, context)
        timeout = datetime.timedelta(seconds=arguments.collective_timeout)
        dist.init_process_group(arguments.backend, timeout=timeout)
        user = user_code_for(runner)
        if not os.path.isfile(arguments.file):
            raise runner.ProbeFailure("file", f"no such file: {arguments.file}", arguments.file)
        module = runner.import_user_file(arguments.file, user, arguments.origin)
        strategies = STRATEGIES if arguments.strategy == "both" else (arguments.strategy,)
        for strategy in strategies:
            run = StrategyRun(strategy, arguments, context, runner, user, module, stack_file)
            record["runs"].append(run.run())
            write_json(f"{base}.json", record)
            with watchdog(arguments.collective_timeout * WATCHDOG_SHARE, stack_file):
                dist.barrier()
        strategy = None
        gather_to_rank_zero(record, arguments.out, dist)
        write_json(f"{base}.json", record)
        dist.destroy_process_group()
        return 0
    except BaseException as exc:  # noqa: BLE001 - the user's code may raise anything
        record["error"] = error_record(exc, strategy, user, arguments.file)
        write_json(f"{base}.json", record)
        return 1


def gather_to_rank_zero(record: dict[str, Any], out: str, dist: Any) -> None:
    """Every rank's record on global rank 0, which writes them to ranks.json: on several hosts
    the per-rank files are spread over their local folders, this one has them all."""
    gathered: list[Any] | None = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    dist.gather_object(record, gathered, dst=0)
    if gathered is not None:
        write_json(os.path.join(out, "ranks.json"), gathered)


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: threads the user's code started must not keep the rank alive.
    os._exit(status)
