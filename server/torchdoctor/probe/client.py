"""Run the probe runner under the user's interpreter and stream its events back.

This side never imports torch. Each runner process is started without a shell, in a process
group of its own (``start_new_session``), in the interpreter's own environment (not the
server's: see `runner_environment`). A time-out or a cancellation kills the runner and
everything it started, wherever that moved (`ProcessTree`), and no wait here outlasts its
bound: a process that keeps our pipes open cannot hold up a probe or the server's shutdown.
The runner runs each probe in a fresh child it forks (see runner/worker.py), so nothing of one probe
survives into the next. Two ways to run:

- `run_probe` / `stream_probe`: a fresh runner per probe (pays ``import torch`` each time);
- `WorkerPool`: one warm runner per interpreter that keeps torch imported; it is restarted
  when it dies.

Every probe ends in exactly one final event: a `ResultEvent`, or an `ErrorEvent` whose kind
says what went wrong (runner kinds, or "spawn", "exited", "protocol", "timeout", "flood",
"cancelled" from this side). Runner problems never raise.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import re
import secrets
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .build_options import BuildOptionError, BuildOptions
from .cgroup import RunnerCgroup
from .interpreters import resolve_interpreter
from .process_tree import ProcessTree, group_alive
from .schema import (
    ErrorEvent,
    FinalEvent,
    ProbeEvent,
    ProgressEvent,
    ResultEvent,
    SchemaError,
    parse_event,
)
from .sweep_options import SweepOptionError, SweepOptions

RUNNER_PATH = Path(__file__).with_name("runner")
"""The runner package's folder: `python RUNNER_PATH` runs its __main__.py."""
DEVICES = ("auto", "cpu", "cuda")
_TARGET = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# The input grammar's characters (input_spec.py); the runner is started without a shell, and
# `$`, backquotes, `&`, `|`, `<`, `>` are refused all the same.
_INPUT_CHARACTERS = re.compile(r"[\w\s(),:;\[\]{}=.+\-'\"]*")
_FAULTHANDLER_FRAME = re.compile(r'File "(?P<file>.+)", line (?P<line>\d+) in (?P<function>\S+)')
# Variables that make a Python import from elsewhere or read and write text differently. The
# server's own start sets several (its bundled libraries on PYTHONPATH, UTF-8 mode): the
# user's interpreter gets none of them, so their model runs as it would from their shell.
SERVER_PYTHON_VARIABLES = (
    "PYTHONHOME",
    "PYTHONUTF8",
    "PYTHONIOENCODING",
    "PYTHONSAFEPATH",
    "PYTHONNOUSERSITE",
    "PYTHONSTARTUP",
    "PYTHONINSPECT",
    "PYTHONEXECUTABLE",
    "__PYVENV_LAUNCHER__",
    "TORCHDOCTOR_SERVER_PYTHONPATH",
)
# A PYTHONPATH entry holding one of these is the server's (its bundle or source checkout).
SERVER_PACKAGES = ("torchdoctor", "pygls", "lsprotocol")
RECORD_INTERVAL_S = 0.5  # how often the processes below a running probe are noted
EXIT_WAIT_S = 5.0  # the longest wait for a killed runner to be reaped and its pipes to close

EventCallback = Callable[[ProbeEvent], None]


class ProbeArgumentError(ValueError):
    """Options that cannot be sent to the runner."""


@dataclass(frozen=True)
class ProbeOptions:
    """What to probe and how; mirrors the runner's command line."""

    file: str
    target: str
    input_spec: str | None = None
    device: str = "auto"
    iters: int = 10
    warmup: int = 2
    threads: int | None = None
    explain: bool = False
    timing_budget_s: float = 4.0
    cwd: str | None = None
    origin: str | None = None
    """The user's file when `file` is a copy of its unsaved text (sibling and relative
    imports then resolve from the user's folder and package)."""
    build: BuildOptions = BuildOptions()
    """Constructor arguments, factory, dtype, autocast, memory format."""
    sweep: SweepOptions = SweepOptions()
    """The batch-size sweep (--batch-sweep, --max-memory)."""

    def validated(self) -> ProbeOptions:
        """A copy with an absolute file path; ProbeArgumentError when anything is off."""
        path = os.path.abspath(self.file)
        if not os.path.isfile(path):
            raise ProbeArgumentError(f"no such file: {self.file}")
        if not _TARGET.fullmatch(self.target):
            raise ProbeArgumentError(f"target must be a class or function name: {self.target!r}")
        if self.device not in DEVICES:
            raise ProbeArgumentError(f"device must be one of {', '.join(DEVICES)}: {self.device}")
        if not _is_int_in(self.iters, 1, 10_000):
            raise ProbeArgumentError(f"iters must be an integer from 1 to 10000: {self.iters!r}")
        if not _is_int_in(self.warmup, 0, 1000):
            raise ProbeArgumentError(f"warmup must be an integer from 0 to 1000: {self.warmup!r}")
        if self.threads is not None and not _is_int_in(self.threads, 1, 4096):
            raise ProbeArgumentError(f"threads must be a positive integer: {self.threads!r}")
        if isinstance(self.timing_budget_s, bool) or not (
            isinstance(self.timing_budget_s, (int, float)) and self.timing_budget_s > 0
        ):
            raise ProbeArgumentError("timing_budget_s must be a positive number")
        if self.input_spec is not None and (
            len(self.input_spec) > 1000 or not _INPUT_CHARACTERS.fullmatch(self.input_spec)
        ):
            raise ProbeArgumentError(
                f"input must look like (8, 3, 224, 224) or [(8, 16):int64, (8, 16)]: "
                f"{self.input_spec!r}"
            )
        if self.cwd is not None and not os.path.isdir(self.cwd):
            raise ProbeArgumentError(f"cwd is not a directory: {self.cwd}")
        origin = os.path.abspath(self.origin) if self.origin is not None else None
        try:
            build = self.build.validated()
        except BuildOptionError as exc:
            raise ProbeArgumentError(str(exc)) from None
        try:
            sweep = self.sweep.validated()
        except SweepOptionError as exc:
            raise ProbeArgumentError(str(exc)) from None
        return replace(self, file=path, origin=origin, build=build, sweep=sweep)

    def runner_arguments(self, memory_limit_bytes: int | None = None) -> list[str]:
        arguments = [
            "--file", self.file,
            "--target", self.target,
            "--device", self.device,
            "--iters", str(self.iters),
            "--warmup", str(self.warmup),
            "--timing-budget", str(self.timing_budget_s),
        ]
        if self.input_spec is not None:
            arguments += ["--input", self.input_spec]
        if self.threads is not None:
            arguments += ["--threads", str(self.threads)]
        if self.explain:
            arguments.append("--explain")
        if self.cwd is not None:
            arguments += ["--cwd", self.cwd]
        if self.origin is not None:
            arguments += ["--origin", self.origin]
        if memory_limit_bytes:
            arguments += ["--memory-limit", str(memory_limit_bytes)]
        return arguments + self.build.runner_arguments() + self.sweep.runner_arguments()

    def worker_request(
        self, request_id: str, memory_limit_bytes: int | None = None
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "id": request_id,
            "file": self.file,
            "target": self.target,
            "input": self.input_spec,
            "device": self.device,
            "iters": self.iters,
            "warmup": self.warmup,
            "threads": self.threads,
            "explain": self.explain,
            "timing_budget_s": self.timing_budget_s,
            "cwd": self.cwd,
        }
        if self.origin is not None:
            request["origin"] = self.origin
        if memory_limit_bytes:
            request["memory_limit_bytes"] = memory_limit_bytes
        request.update(self.build.request_fields())
        request.update(self.sweep.request_fields())
        return request


def _is_int_in(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


@dataclass(frozen=True)
class ProbeLimits:
    """Bounds on one probe's runner process."""

    timeout_s: float = 300.0
    """Wall-clock limit per probe, a cold worker's start included; the runner's whole process
    group is killed after it."""
    memory_limit_bytes: int | None = None
    """RLIMIT_AS for each probe (address space, not resident memory), set in the child that
    runs it. A probe on CUDA runs without it: the driver reserves far more address space
    than it uses."""
    max_output_bytes: int = 64 * 1024 * 1024
    """Most stdout bytes one probe may produce before it is stopped as a flood."""
    max_line_bytes: int = 16 * 1024 * 1024
    """Longest event line (a report of a model with many thousand modules fits)."""
    max_user_output_bytes: int = 64 * 1024 * 1024
    """Most bytes the user's code may print in one probe. The runner sends its prints and
    stderr to our stderr pipe, which is drained and only its tail kept: without this cap a
    model printing in an endless loop would run until the time-out under a vaguer error."""
    stderr_tail_bytes: int = 16 * 1024
    """How much of the end of the runner's stderr errors carry."""


def runner_environment(server_environment: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the user's interpreter starts with: the server's, less what the server's
    own start added for its Python (see SERVER_PYTHON_VARIABLES); PYTHONPATH keeps only the
    entries that are not the server's libraries."""
    environment = dict(os.environ if server_environment is None else server_environment)
    for name in SERVER_PYTHON_VARIABLES:
        environment.pop(name, None)
    python_path = environment.pop("PYTHONPATH", "")
    kept = [
        entry
        for entry in python_path.split(os.pathsep)
        if entry and not any(os.path.isdir(os.path.join(entry, p)) for p in SERVER_PACKAGES)
    ]
    if kept:
        environment["PYTHONPATH"] = os.pathsep.join(kept)
    return environment


def process_group_alive(pgid: int) -> bool:
    """True while any non-zombie process is left in the group."""
    return group_alive(pgid)


class _StderrTail:
    """Keeps the last bytes of a stream without ever holding more."""

    def __init__(self, limit: int) -> None:
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._limit = limit
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self._size += len(chunk)
        self.total += len(chunk)
        while self._size - len(self._chunks[0]) >= self._limit:
            self._size -= len(self._chunks.popleft())

    def text(self) -> str:
        data = b"".join(self._chunks)[-self._limit :]
        return data.decode("utf-8", errors="replace")

    def mark(self) -> int:
        return self.total

    def since(self, mark: int) -> str:
        """What arrived after `mark`, as far as the tail still holds it."""
        fresh = self.total - mark
        if fresh <= 0:
            return ""
        data = b"".join(self._chunks)
        return data[-min(fresh, len(data)) :].decode("utf-8", errors="replace")


class _RunnerProcess:
    """One runner process in its own process group, with its stdout read line by line. Its
    stdin is a pipe kept open for as long as the runner lives: when this process dies, the
    runner reads end of file and stops its probe."""

    def __init__(self, process: asyncio.subprocess.Process, limits: ProbeLimits) -> None:
        self.process = process
        self.limits = limits
        self.tree = ProcessTree(process.pid)
        # where allowed, a cgroup holds everything forked under the runner (see cgroup.py);
        # the runner imports torch before it forks anything, so nothing starts outside it
        self.cgroup = RunnerCgroup.create(process.pid)
        self.stderr = _StderrTail(limits.stderr_tail_bytes)
        self.stderr_flood = asyncio.Event()
        self._stderr_budget: tuple[int, int] | None = None  # (mark, most bytes after it)
        self._stderr_task = asyncio.ensure_future(self._drain_stderr())

    @property
    def pid(self) -> int:
        return self.process.pid

    @classmethod
    async def spawn(cls, python: str, arguments: list[str], limits: ProbeLimits) -> _RunnerProcess:
        process = await asyncio.create_subprocess_exec(
            python,
            str(RUNNER_PATH),
            *arguments,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            env=runner_environment(),
            limit=limits.max_line_bytes,
        )
        return cls(process, limits)

    async def record_tree(self, interval_s: float = RECORD_INTERVAL_S) -> None:
        """Note the processes below the runner until cancelled (see ProcessTree)."""
        while True:
            await asyncio.to_thread(self.tree.record)
            await asyncio.sleep(interval_s)

    async def _drain_stderr(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        while True:
            chunk = await stream.read(65536)
            if not chunk:
                return
            self.stderr.add(chunk)
            budget = self._stderr_budget
            if budget is not None and self.stderr.total - budget[0] > budget[1]:
                self.stderr_flood.set()

    def limit_stderr(self, most_bytes: int) -> None:
        """Set `stderr_flood` once more than `most_bytes` arrive from now on (one probe's)."""
        self.stderr_flood.clear()
        self._stderr_budget = (self.stderr.total, most_bytes)

    @property
    def running(self) -> bool:
        return self.process.returncode is None

    async def read_line(self) -> bytes:
        """One stdout line (b"" at end of file). Raises ValueError when it is too long."""
        stream = self.process.stdout
        assert stream is not None
        try:
            return await stream.readline()
        except asyncio.LimitOverrunError as exc:
            raise ValueError(str(exc)) from None

    async def write_line(self, data: dict[str, Any]) -> None:
        stream = self.process.stdin
        assert stream is not None
        stream.write((json.dumps(data) + "\n").encode("utf-8"))
        try:  # a runner that stopped reading must not hold us up: the probe's time-out acts
            await asyncio.wait_for(stream.drain(), EXIT_WAIT_S)
        except asyncio.TimeoutError:
            pass

    async def dump_stack(self, wait_s: float = 1.0) -> str:
        """Ask the runner for its Python stacks (faulthandler on SIGUSR1) before a kill."""
        mark = self.stderr.mark()
        with contextlib.suppress(ProcessLookupError, AttributeError):
            os.kill(self.pid, signal.SIGUSR1)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while loop.time() < deadline:
            await asyncio.sleep(0.05)
            if "most recent call first" in self.stderr.since(mark):
                await asyncio.sleep(0.1)  # the rest of the dump follows in the same burst
                break
        return self.stderr.since(mark)

    async def kill_group(self) -> None:
        """SIGKILL the runner and every process started under it, then reap the runner."""
        await asyncio.to_thread(self.kill_now)
        if self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.close()
        await self.wait_exit()

    def kill_now(self) -> None:
        """The same kill without an event loop (at exit); nothing is reaped."""
        if self.cgroup is not None:
            self.cgroup.kill()
        self.tree.kill()

    async def _discard_stdout(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        with contextlib.suppress(Exception):
            while await stream.read(1 << 16):
                pass

    async def wait_exit(self, wait_s: float = EXIT_WAIT_S) -> int | None:
        """Wait (at most `wait_s`) for the runner to exit; its status, None if it did not.
        Never waits on the pipes: asyncio's wait() also waits for them to reach end of file,
        which a process that inherited them (a child in a session of its own) may never let
        happen. Once the runner is gone, our ends of the pipes are closed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        drain = asyncio.ensure_future(self._discard_stdout())  # a paused flood must flow
        try:
            while self.process.returncode is None and loop.time() < deadline:
                await asyncio.sleep(0.01)
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(drain), max(deadline - loop.time(), 0.05))
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                stderr_wait = max(deadline - loop.time(), 0.5)  # the last words it wrote
                await asyncio.wait_for(asyncio.shield(self._stderr_task), stderr_wait)
        finally:
            drain.cancel()
            if self.process.returncode is not None:
                self._close_pipes()
        return self.process.returncode

    def _close_pipes(self) -> None:
        transport = getattr(self.process, "_transport", None)
        if transport is not None:
            transport.close()
        if not self._stderr_task.done():
            self._stderr_task.cancel()

    async def close(self) -> None:
        """Stop the runner and anything it left behind in its group."""
        if self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.close()
        await self.kill_group()


def _frame_in_dump(dump: str, user_file: str) -> tuple[str, int, str] | None:
    """The line the runner was executing, from a faulthandler dump: the user's file first,
    else the first frame that is not torch, the standard library or the runner."""
    frames = [
        (m.group("file"), int(m.group("line")), m.group("function"))
        for m in _FAULTHANDLER_FRAME.finditer(dump)
    ]
    for frame in frames:
        if os.path.abspath(frame[0]) == user_file:
            return frame
    for frame in frames:
        path = frame[0]
        library = ("site-packages", "dist-packages", "/lib/python", str(RUNNER_PATH))
        if not path.startswith("<") and not any(part in path for part in library):
            return frame
    return None


def _last_error_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _exit_description(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"exited with status {code}"


class _ProbeDriver:
    """Reads one probe's events from a runner until its final event, enforcing the limits."""

    def __init__(
        self,
        runner: _RunnerProcess,
        options: ProbeOptions,
        limits: ProbeLimits,
        on_event: EventCallback | None,
        cancel: asyncio.Event | None,
        request_id: str | None,
    ) -> None:
        self.runner = runner
        self.options = options
        self.limits = limits
        self.on_event = on_event
        self.cancel = cancel
        self.request_id = request_id
        self.output_bytes = 0
        self.stderr_mark = 0  # where this probe's stderr starts in the runner's
        self.killed = False
        self.answered = False  # the runner has sent an event for this probe
        self.emit_final = True  # pass the final event to on_event too
        # a worker that has not said "ready" yet runs no user code: an error without an id is
        # its own (torch cannot be imported) and answers this probe
        self.starting = False

    def _emit(self, event: ProbeEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    async def run(self) -> FinalEvent:
        final = await self._read_until_final()
        if self.emit_final:
            self._emit(final)
        return final

    async def _read_until_final(self) -> FinalEvent:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.timeout_s
        cancel_waiter = asyncio.ensure_future(self.cancel.wait()) if self.cancel else None
        self.stderr_mark = self.runner.stderr.mark()
        self.runner.limit_stderr(self.limits.max_user_output_bytes)
        flood_waiter = asyncio.ensure_future(self.runner.stderr_flood.wait())
        recorder = asyncio.ensure_future(self.runner.record_tree())
        try:
            while True:
                line_task = asyncio.ensure_future(self.runner.read_line())
                waiters = {line_task, flood_waiter} | ({cancel_waiter} if cancel_waiter else set())
                done, _ = await asyncio.wait(
                    waiters,
                    timeout=max(deadline - loop.time(), 0),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if line_task not in done:
                    line_task.cancel()
                    if cancel_waiter is not None and cancel_waiter in done:
                        return await self._stop("cancelled", "the probe was cancelled")
                    if flood_waiter in done:
                        return await self._flooded()
                    return await self._timed_out()
                final = await self._handle_line(line_task)
                if final is not None:
                    return final
        except asyncio.CancelledError:
            await self.runner.kill_group()
            self.killed = True
            raise
        finally:
            flood_waiter.cancel()
            recorder.cancel()
            if cancel_waiter is not None:
                cancel_waiter.cancel()

    async def _handle_line(self, line_task: asyncio.Future[bytes]) -> FinalEvent | None:
        try:
            line = line_task.result()
        except ValueError:
            return await self._stop(
                "flood", f"the runner wrote a line longer than {self.limits.max_line_bytes} bytes"
            )
        if not line:
            return await self._exited()
        self.output_bytes += len(line)
        if self.output_bytes > self.limits.max_output_bytes:
            return await self._stop(
                "flood", f"the runner wrote more than {self.limits.max_output_bytes} bytes"
            )
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise ValueError("not an object")
        except ValueError:
            preview = line[:200].decode("utf-8", errors="replace").strip()
            return await self._stop("protocol", f"the runner wrote a non-JSON line: {preview!r}")
        if data.get("event") == "ready":
            self.starting = False
        startup_error = self.starting and data.get("event") == "error" and "id" not in data
        if self.request_id is not None and data.get("id") != self.request_id and not startup_error:
            # the worker tags every event of this probe with its id, a secret nothing else
            # knows: anything else (its own "ready", a late or forged event) is not ours
            return None
        self.answered = True
        try:
            event = parse_event(data)
        except (SchemaError, TypeError, ValueError) as exc:
            return await self._stop("protocol", f"the runner sent an unreadable event: {exc}")
        if isinstance(event, ProgressEvent):
            self._emit(event)
            return None
        if isinstance(event, ErrorEvent) and event.kind == "exited":
            return self._child_exited(event)
        if isinstance(event, ErrorEvent):
            return replace(event, stderr_tail=self.runner.stderr.text() or None)
        if isinstance(event, ResultEvent):
            return event
        return None

    async def _stop(self, kind: str, message: str, **extra: Any) -> ErrorEvent:
        await self.runner.kill_group()
        self.killed = True
        return ErrorEvent(
            kind=kind,
            message=message,
            exit_code=self.runner.process.returncode,
            stderr_tail=self.runner.stderr.text() or None,
            **extra,
        )

    async def _flooded(self) -> ErrorEvent:
        dump = await self.runner.dump_stack()
        frame = _frame_in_dump(dump, self.options.file)
        where = f"; it was running {frame[0]}:{frame[1]} in {frame[2]}" if frame else ""
        return await self._stop(
            "flood",
            f"the model printed more than {self.limits.max_user_output_bytes} bytes "
            f"(print or stderr) and was stopped{where}",
            file=frame[0] if frame else None,
            line=frame[1] if frame else None,
        )

    async def _timed_out(self) -> ErrorEvent:
        dump = await self.runner.dump_stack()
        frame = _frame_in_dump(dump, self.options.file)
        where = f"; it was running {frame[0]}:{frame[1]} in {frame[2]}" if frame else ""
        return await self._stop(
            "timeout",
            f"the probe did not finish within {self.limits.timeout_s:g} s{where}",
            file=frame[0] if frame else None,
            line=frame[1] if frame else None,
        )

    async def _exited(self) -> ErrorEvent:
        """The runner closed its stdout: it exited (or will not talk any more)."""
        code = await self.runner.wait_exit()
        self.killed = True
        await self.runner.kill_group()  # whatever it started goes with it
        if code is None:
            code = self.runner.process.returncode
        return self._exit_error(code, self.runner.stderr.text())

    def _child_exited(self, event: ErrorEvent) -> ErrorEvent:
        """The worker's child that ran this probe ended without a result; the worker lives."""
        return self._exit_error(event.exit_code, self.runner.stderr.since(self.stderr_mark))

    def _exit_error(self, code: int | None, stderr: str) -> ErrorEvent:
        crashed = "Fatal Python error" in stderr  # faulthandler's dump on a fatal signal
        frame = _frame_in_dump(stderr, self.options.file) if crashed else None
        reason = _last_error_line(stderr)
        how = _exit_description(code) if code is not None else "stopped answering"
        message = f"the runner {how} before reporting a result"
        if reason:
            message += f": {reason}"
        return ErrorEvent(
            kind="exited",
            message=message,
            file=frame[0] if frame else None,
            line=frame[1] if frame else None,
            exit_code=code,
            stderr_tail=stderr or None,
        )


def _spawn_error(python: str, detail: str) -> ErrorEvent:
    return ErrorEvent(kind="spawn", message=f"cannot start {python!r}: {detail}")


async def run_probe(
    python: str,
    options: ProbeOptions,
    *,
    limits: ProbeLimits | None = None,
    on_event: EventCallback | None = None,
    cancel: asyncio.Event | None = None,
    timeout_s: float | None = None,
) -> FinalEvent:
    """Probe in a fresh runner process. Progress events go to `on_event` as they arrive; the
    final event is returned (and passed to `on_event` too). Setting `cancel` (or cancelling
    the awaiting task) kills the runner's whole process group."""
    limits = limits or ProbeLimits()
    if timeout_s is not None:
        limits = replace(limits, timeout_s=timeout_s)
    options = options.validated()
    interpreter = resolve_interpreter(python)
    if interpreter is None:
        event = _spawn_error(python, "no such executable")
        if on_event:
            on_event(event)
        return event
    try:
        arguments = options.runner_arguments(limits.memory_limit_bytes)
        runner = await _RunnerProcess.spawn(interpreter, arguments, limits)
    except OSError as exc:
        event = _spawn_error(python, str(exc))
        if on_event:
            on_event(event)
        return event
    driver = _ProbeDriver(runner, options, limits, on_event, cancel, request_id=None)
    try:
        return await driver.run()
    finally:
        # A finished runner exits on its own; anything it spawned must not outlive it.
        await asyncio.shield(runner.kill_group())


class ProbeStream:
    """Async iterator over one probe's events, ending with its final event.

        async with stream_probe(python, options) as events:
            async for event in events: ...

    Leaving the `async with` early (or `aclose()`) stops the probe and kills its runner.
    """

    def __init__(self, start: Callable[[EventCallback, asyncio.Event], Any]) -> None:
        self._queue: asyncio.Queue[ProbeEvent | None] = asyncio.Queue()
        self._cancel = asyncio.Event()
        self._task = asyncio.ensure_future(self._drive(start))

    async def _drive(self, start: Callable[[EventCallback, asyncio.Event], Any]) -> None:
        try:
            await start(self._queue.put_nowait, self._cancel)
        finally:
            self._queue.put_nowait(None)

    def __aiter__(self) -> AsyncIterator[ProbeEvent]:
        return self

    async def __anext__(self) -> ProbeEvent:
        event = await self._queue.get()
        if event is None:
            await self._task  # surfaces an unexpected exception from the driver
            raise StopAsyncIteration
        return event

    def cancel(self) -> None:
        """Stop the probe; the stream still ends with an ErrorEvent of kind "cancelled"."""
        self._cancel.set()

    async def aclose(self) -> None:
        if not self._task.done():
            self._cancel.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def __aenter__(self) -> ProbeStream:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()


def stream_probe(
    python: str, options: ProbeOptions, *, limits: ProbeLimits | None = None
) -> ProbeStream:
    """`run_probe` as an async iterator of events (fresh runner)."""

    def start(on_event: EventCallback, cancel: asyncio.Event) -> Any:
        return run_probe(python, options, limits=limits, on_event=on_event, cancel=cancel)

    return ProbeStream(start)


class ProbeWorker:
    """A warm runner for one interpreter: torch stays imported between probes."""

    def __init__(self, python: str, limits: ProbeLimits) -> None:
        self.python = python
        self.limits = limits
        self._runner: _RunnerProcess | None = None
        self._lock = asyncio.Lock()
        self._ready = False

    @property
    def pid(self) -> int | None:
        return self._runner.pid if self._runner is not None and self._runner.running else None

    @property
    def alive(self) -> bool:
        return self.pid is not None

    async def start(self) -> int:
        """Start the runner if it is not running; returns its pid. Raises OSError."""
        if self._runner is None or not self._runner.running:
            self._runner = await _RunnerProcess.spawn(self.python, ["--worker"], self.limits)
            self._ready = False
        return self._runner.pid

    async def wait_ready(self, timeout_s: float = 120.0) -> int:
        """Start the runner and wait until torch is imported and warmed up; returns its pid.
        Raises OSError when it cannot start or dies first, TimeoutError when it is too slow."""
        async with self._lock:
            pid = await self.start()
            runner = self._runner
            assert runner is not None
            while not self._ready:
                line = await asyncio.wait_for(runner.read_line(), timeout_s)
                if not line:
                    await runner.kill_group()
                    self._runner = None
                    detail = _last_error_line(runner.stderr.text())
                    raise OSError(f"the worker exited while starting: {detail}")
                with contextlib.suppress(ValueError):
                    self._ready = json.loads(line).get("event") == "ready"
            return pid

    async def probe(
        self,
        options: ProbeOptions,
        *,
        on_event: EventCallback | None = None,
        cancel: asyncio.Event | None = None,
        timeout_s: float | None = None,
        limits: ProbeLimits | None = None,
    ) -> FinalEvent:
        """Probe in this worker (started if needed). `limits` replace the worker's for this
        probe (the time-out, the memory limit); `timeout_s` overrides their time-out."""
        options = options.validated()
        limits = limits or self.limits
        if timeout_s is not None:
            limits = replace(limits, timeout_s=timeout_s)
        async with self._lock:
            # A worker that died while idle is only noticed when it does not answer: then
            # the probe runs once more in a fresh worker.
            for attempt in range(2):
                try:
                    await self.start()
                except OSError as exc:
                    return self._final(_spawn_error(self.python, str(exc)), on_event)
                final, answered = await self._probe_once(options, limits, on_event, cancel)
                died_idle = isinstance(final, ErrorEvent) and final.kind == "exited"
                if not (died_idle and not answered and attempt == 0):
                    break
            if on_event is not None:
                on_event(final)
            return final

    async def _probe_once(
        self,
        options: ProbeOptions,
        limits: ProbeLimits,
        on_event: EventCallback | None,
        cancel: asyncio.Event | None,
    ) -> tuple[FinalEvent, bool]:
        runner = self._runner
        assert runner is not None
        request_id = secrets.token_hex(16)  # see _ProbeDriver._handle_line
        try:
            await runner.write_line(options.worker_request(request_id, limits.memory_limit_bytes))
        except (BrokenPipeError, ConnectionResetError):
            pass  # it died already: the driver reads EOF and reports how
        driver = _ProbeDriver(runner, options, limits, on_event, cancel, request_id)
        driver.emit_final = False
        driver.starting = not self._ready
        try:
            final = await driver.run()
        finally:
            if driver.killed or not runner.running:
                self._runner = None
        self._ready = self._runner is not None
        return final, driver.answered

    @staticmethod
    def _final(event: ErrorEvent, on_event: EventCallback | None) -> ErrorEvent:
        if on_event is not None:
            on_event(event)
        return event

    async def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.close()

    def kill_now(self) -> None:
        """Kill the worker and all it started without an event loop (at exit)."""
        if self._runner is not None:
            self._runner.kill_now()


class WorkerPool:
    """Warm workers keyed by interpreter path, at most `max_workers` at a time (the least
    recently used idle one is closed to make room). Probes on one interpreter run one after
    the other; a dead worker is replaced on the next probe."""

    def __init__(self, limits: ProbeLimits | None = None, max_workers: int = 2) -> None:
        self.limits = limits or ProbeLimits()
        self.max_workers = max_workers
        self._workers: collections.OrderedDict[str, ProbeWorker] = collections.OrderedDict()

    def _worker_for(self, interpreter: str) -> ProbeWorker:
        worker = self._workers.get(interpreter)
        if worker is None:
            worker = ProbeWorker(interpreter, self.limits)
            self._workers[interpreter] = worker
        self._workers.move_to_end(interpreter)
        return worker

    async def _make_room(self) -> None:
        while len(self._workers) > self.max_workers:
            oldest_key = next(iter(self._workers))
            oldest = self._workers.pop(oldest_key)
            await oldest.close()

    async def warm(self, python: str, *, wait: bool = True, timeout_s: float = 120.0) -> int:
        """Start (or keep) the worker for `python` ahead of the first probe; returns its pid.
        With `wait`, returns once torch is imported and warmed up in it (raises OSError or
        TimeoutError when it cannot get there)."""
        interpreter = resolve_interpreter(python)
        if interpreter is None:
            raise ProbeArgumentError(f"no such interpreter: {python}")
        worker = self._worker_for(interpreter)
        await self._make_room()
        if wait:
            return await worker.wait_ready(timeout_s)
        return await worker.start()

    def pid(self, python: str) -> int | None:
        interpreter = resolve_interpreter(python)
        worker = self._workers.get(interpreter) if interpreter else None
        return worker.pid if worker else None

    async def probe(
        self,
        python: str,
        options: ProbeOptions,
        *,
        on_event: EventCallback | None = None,
        cancel: asyncio.Event | None = None,
        timeout_s: float | None = None,
        limits: ProbeLimits | None = None,
    ) -> FinalEvent:
        """Probe in the warm worker for `python`; `limits` (and `timeout_s`) override the
        pool's for this probe."""
        interpreter = resolve_interpreter(python)
        if interpreter is None:
            return ProbeWorker._final(_spawn_error(python, "no such executable"), on_event)
        worker = self._worker_for(interpreter)
        await self._make_room()
        return await worker.probe(
            options, on_event=on_event, cancel=cancel, timeout_s=timeout_s, limits=limits
        )

    def stream(self, python: str, options: ProbeOptions) -> ProbeStream:
        def start(on_event: EventCallback, cancel: asyncio.Event) -> Any:
            return self.probe(python, options, on_event=on_event, cancel=cancel)

        return ProbeStream(start)

    async def close(self) -> None:
        workers = list(self._workers.values())
        self._workers.clear()
        for worker in workers:
            await worker.close()

    def kill_now(self) -> None:
        """At exit, when there is no event loop left to close the workers with."""
        for worker in self._workers.values():
            worker.kill_now()

