"""Launch the distributed probe: the user's model on N ranks under torchrun, contained.

This side never imports torch. It starts `<python> rank_launcher.py <torchrun arguments>
rank_worker.py <probe arguments>` in a process group of its own; the launcher makes itself a
child subreaper and dies with this process, each rank dies with the launcher. The probe's
isolation is kept: a time-out (each rank's Python stack is asked for with SIGUSR1 first), a
cancel, a flood of output and a memory limit per rank (RLIMIT_AS, CPU) all end the job, and
every path ends with a kill of the whole process tree (and the job's cgroup, where one can be
made), so no rank is left behind. Results come back as files in a private folder (see
rank_worker.py), read and then removed; `distributed_summary.summarize` turns them into the
report's `distributed` section.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .cgroup import RunnerCgroup
from .client import ProbeArgumentError, ProbeLimits, runner_environment
from .distributed_schema import DistributedInfo
from .distributed_summary import JobOutcome, rank_exit_codes, summarize
from .interpreters import resolve_interpreter
from .process_tree import ProcessTree

PROBE_DIR = Path(__file__).parent
LAUNCHER_PATH = PROBE_DIR / "rank_launcher.py"
RANK_WORKER_PATH = PROBE_DIR / "rank_worker.py"
STRATEGY_CHOICES = ("ddp", "fsdp", "both")
BACKEND_CHOICES = ("auto", "gloo", "nccl")
MAX_NPROC = 64
STACK_WAIT_S = 2.0  # how long the ranks get to write their stacks after SIGUSR1
POLL_S = 0.05
RECORD_INTERVAL_S = 0.5
EXIT_WAIT_S = 5.0
OUTPUT_TAIL_BYTES = 64 * 1024

ProgressCallback = Callable[[str], None]


def visible_gpu_count() -> int:
    """NVIDIA GPUs this host shows (without importing torch), less those CUDA_VISIBLE_DEVICES
    hides."""
    try:
        count = len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        count = min(count, len([d for d in visible.split(",") if d.strip()]))
    return count


@dataclass(frozen=True)
class DistributedOptions:
    file: str
    target: str
    nproc: int = 2
    strategy: str = "both"
    backend: str = "auto"
    """"auto": NCCL when this host shows at least `nproc` GPUs, else gloo on CPU."""
    input_spec: str | None = None
    iters: int = 5
    warmup: int = 2
    threads: int | None = None
    collective_timeout_s: float = 60.0
    """The process group's time-out: a collective that waits longer fails."""
    origin: str | None = None

    def validated(self) -> DistributedOptions:
        path = os.path.abspath(self.file)
        if not os.path.isfile(path):
            raise ProbeArgumentError(f"no such file: {self.file}")
        if not _int_in(self.nproc, 1, MAX_NPROC):
            raise ProbeArgumentError(f"--nproc must be an integer from 1 to {MAX_NPROC}")
        if self.strategy not in STRATEGY_CHOICES:
            raise ProbeArgumentError(f"--strategy must be one of {', '.join(STRATEGY_CHOICES)}")
        if self.backend not in BACKEND_CHOICES:
            raise ProbeArgumentError(f"--backend must be one of {', '.join(BACKEND_CHOICES)}")
        if not _int_in(self.iters, 1, 10_000) or not _int_in(self.warmup, 0, 1000):
            raise ProbeArgumentError("iters must be 1..10000 and warmup 0..1000")
        if not self.collective_timeout_s > 0:
            raise ProbeArgumentError("the collective time-out must be positive")
        backend = self.backend
        if backend == "auto":
            backend = "nccl" if visible_gpu_count() >= self.nproc else "gloo"
        origin = os.path.abspath(self.origin) if self.origin else None
        return replace(self, file=path, backend=backend, origin=origin)

    @property
    def strategies(self) -> list[str]:
        return ["ddp", "fsdp"] if self.strategy == "both" else [self.strategy]

    def torchrun_arguments(self) -> list[str]:
        """One host, a rendezvous on a free local port, no restarts: a failed rank ends it."""
        return [
            "--nproc-per-node", str(self.nproc),
            "--standalone",
            "--max-restarts", "0",
            "--monitor-interval", "0.2",
        ]

    def worker_arguments(self, out: str) -> list[str]:
        arguments = [
            "--file", self.file,
            "--target", self.target,
            "--strategy", self.strategy,
            "--backend", self.backend,
            "--iters", str(self.iters),
            "--warmup", str(self.warmup),
            "--collective-timeout", f"{self.collective_timeout_s:g}",
            "--out", out,
        ]
        if self.input_spec is not None:
            arguments += ["--input", self.input_spec]
        if self.threads is not None:
            arguments += ["--threads", str(self.threads)]
        if self.origin is not None:
            arguments += ["--origin", self.origin]
        return arguments


def _int_in(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def launch_command(
    python: str, options: DistributedOptions, out: str, memory_limit_bytes: int | None = None
) -> list[str]:
    command = [
        python, str(LAUNCHER_PATH), *options.torchrun_arguments(),
        str(RANK_WORKER_PATH), *options.worker_arguments(out),
    ]
    if memory_limit_bytes:
        command += ["--memory-limit", str(memory_limit_bytes)]
    return command


class OutputTail:
    """The end of a stream and how much came in all."""

    def __init__(self, limit: int = OUTPUT_TAIL_BYTES) -> None:
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._limit = limit
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self._size += len(chunk)
        self.total += len(chunk)
        while self._chunks and self._size - len(self._chunks[0]) >= self._limit:
            self._size -= len(self._chunks.popleft())

    def text(self) -> str:
        return b"".join(self._chunks)[-self._limit :].decode("utf-8", errors="replace")


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_rank_files(out: Path) -> tuple[dict[int, Any], dict[int, Any], dict[int, str]]:
    """Start records, result records and stack dumps, by rank. ranks.json (gathered on rank 0)
    fills in the ranks whose own file is elsewhere (other hosts)."""
    starts: dict[int, Any] = {}
    records: dict[int, Any] = {}
    dumps: dict[int, str] = {}
    for path in out.glob("rank_*"):
        stem = path.name.split(".", 1)[0]
        number = stem.removeprefix("rank_")
        if not number.isdigit():
            continue
        rank = int(number)
        if path.name.endswith(".start.json"):
            data = read_json(path)
            if isinstance(data, dict):
                starts[rank] = data
        elif path.name.endswith(".json"):
            data = read_json(path)
            if isinstance(data, dict):
                records[rank] = data
        elif path.name.endswith(".stack"):
            with contextlib.suppress(OSError):
                dumps[rank] = path.read_text(encoding="utf-8", errors="replace")
    gathered = read_json(out / "ranks.json")
    if isinstance(gathered, list):
        for record in gathered:
            if isinstance(record, dict) and isinstance(record.get("rank"), int):
                records.setdefault(record["rank"], record)
    return starts, records, dumps


class DistributedJob:
    """One torchrun job and everything below it."""

    def __init__(self, process: asyncio.subprocess.Process, out: Path, limits: ProbeLimits):
        self.process = process
        self.out = out
        self.limits = limits
        self.tree = ProcessTree(process.pid)
        self.cgroup = RunnerCgroup.create(process.pid)
        self.stdout = OutputTail()
        self.stderr = OutputTail()
        self._drains = [
            asyncio.ensure_future(self._drain(process.stdout, self.stdout)),
            asyncio.ensure_future(self._drain(process.stderr, self.stderr)),
        ]

    @staticmethod
    async def _drain(stream: asyncio.StreamReader | None, tail: OutputTail) -> None:
        if stream is None:
            return
        while chunk := await stream.read(65536):
            tail.add(chunk)

    @property
    def output_bytes(self) -> int:
        return self.stdout.total + self.stderr.total

    def rank_pids(self) -> list[int]:
        starts, _, _ = read_rank_files(self.out)
        return [int(s["pid"]) for s in starts.values() if isinstance(s.get("pid"), int)]

    async def dump_stacks(self) -> None:
        """SIGUSR1 to every rank: faulthandler writes its stack to its .stack file (at a
        time-out or a cancel, before the kill)."""
        sizes = {}
        for pid in self.rank_pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGUSR1)
                sizes[pid] = True
        if sizes:
            await asyncio.sleep(min(STACK_WAIT_S, 0.5))
            deadline = time.monotonic() + STACK_WAIT_S
            while time.monotonic() < deadline and not self._stacks_written():
                await asyncio.sleep(POLL_S)

    def _stacks_written(self) -> bool:
        stacks = list(self.out.glob("rank_*.stack"))
        return bool(stacks) and all(
            "most recent call first" in p.read_text(errors="replace") for p in stacks
        )

    async def wait(
        self, deadline: float, cancel: asyncio.Event | None
    ) -> str | None:
        """None once the job exited; else "timeout", "cancelled" or "flood"."""
        last_record = 0.0
        while self.process.returncode is None:
            now = time.monotonic()
            if cancel is not None and cancel.is_set():
                return "cancelled"
            if now >= deadline:
                return "timeout"
            if self.output_bytes > self.limits.max_user_output_bytes:
                return "flood"
            if now - last_record >= RECORD_INTERVAL_S:
                await asyncio.to_thread(self.tree.record)
                last_record = now
            await asyncio.sleep(POLL_S)
        return None

    async def kill(self) -> None:
        """Every process of the job, wherever it moved; then reap the launcher."""
        if self.cgroup is not None:
            await asyncio.to_thread(self.cgroup.kill)
        await asyncio.to_thread(self.tree.kill)
        deadline = time.monotonic() + EXIT_WAIT_S
        while self.process.returncode is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for drain in self._drains:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(drain), 0.5)
            drain.cancel()
        transport = getattr(self.process, "_transport", None)
        if transport is not None:
            transport.close()


async def run_distributed_probe(
    python: str,
    options: DistributedOptions,
    *,
    limits: ProbeLimits | None = None,
    cancel: asyncio.Event | None = None,
    on_progress: ProgressCallback | None = None,
) -> DistributedInfo:
    """Run the job to its end (or time-out/cancel) and summarise what the ranks wrote."""
    limits = limits or ProbeLimits()
    options = options.validated()
    interpreter = resolve_interpreter(python)
    started = time.monotonic()
    outcome = JobOutcome(
        nproc=options.nproc,
        backend=options.backend,
        strategies=options.strategies,
        user_file=options.file,  # the frames name the file the ranks imported (maybe a copy)
        seconds=0.0,
    )
    if interpreter is None:
        return summarize(replace(outcome, error=f"cannot start {python!r}"), {}, {}, {})
    out = Path(tempfile.mkdtemp(prefix="torchdoctor-ranks-"))
    try:
        command = launch_command(interpreter, options, str(out), limits.memory_limit_bytes)
        try:
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                env=runner_environment(),
            )
        except OSError as exc:
            return summarize(replace(outcome, error=f"cannot start {python!r}: {exc}"), {}, {}, {})
        job = DistributedJob(process, out, limits)
        if on_progress is not None:
            on_progress(f"launched {options.nproc} rank(s) with torchrun ({options.backend})")
        reported_start = False
        try:
            deadline = started + limits.timeout_s
            ending: str | None = None
            while True:
                ending = await job.wait(min(deadline, time.monotonic() + 0.5), cancel)
                if ending != "timeout" or time.monotonic() >= deadline:
                    break
                if not reported_start and on_progress is not None:
                    if len(job.rank_pids()) >= options.nproc:
                        reported_start = True
                        on_progress(f"{options.nproc} rank(s) running")
            if ending in ("timeout", "cancelled"):  # where was each rank: worth 2 s at most
                await job.dump_stacks()
        finally:
            await asyncio.shield(job.kill())
        starts, records, dumps = read_rank_files(out)
        stderr = job.stderr.text()
        outcome = replace(
            outcome,
            seconds=time.monotonic() - started,
            error=ending,
            exit_code=process.returncode,
            rank_exit_codes=rank_exit_codes(stderr),
        )
        info = summarize(outcome, starts, records, dumps)
        if ending == "flood":
            info.warnings.append(
                f"the ranks printed more than {limits.max_user_output_bytes} bytes and were stopped"
            )
        if not records and ending is None:
            last = [line for line in stderr.strip().splitlines() if line.strip()][-1:]
            info.warnings.append(
                "torchrun ended before any rank wrote a result"
                + (f": {last[0].strip()}" if last else "")
            )
        return info
    finally:
        shutil.rmtree(out, ignore_errors=True)
