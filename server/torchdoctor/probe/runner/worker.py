"""One probe per forked child (the warm parent never runs the user's code), the worker loop
and the command line.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import os
import platform
import select
import signal
import stat
import sys
import time
import traceback
from collections.abc import Iterable
from typing import Any

from .companions import PROBE_DIR, RUNNER_DIR, companion_module
from .events import EventStream, ProbeFailure, Progress, take_over_stdin, take_over_stdout
from .inputs import parameters_on_meta
from .one_probe import probe
from .request import (
    DEFAULT_ITERS,
    DEFAULT_TIMING_BUDGET_S,
    DEFAULT_WARMUP,
    DEVICE_CHOICES,
    ProbeRequest,
)
from .user_code import MAX_TRACEBACK_CHARS

# The parent imports torch once and then only forks, relays and cleans up. Each probe runs in
# a fresh child forked from it, so nothing one probe leaves (threads, patched modules, changed
# globals, open files) exists in the next. The child writes its events into a pipe of its own;
# only the parent writes to the client's channel (stdout), tagging each event with the
# request's id, so a leftover of an earlier probe has no way to answer for a later one.
#
# The parent is a child subreaper (Linux): whatever the probe starts stays its descendant even
# when it double-forks or moves to a new session, and is killed with the probe. The client's
# request pipe is watched the whole time: its end of file means the client died, and the
# parent then kills the probe and exits instead of leaving it running.

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
MAX_CHILD_LINE_BYTES = 256 * 1024 * 1024
CHILD_EXIT_GRACE_S = 5.0
# Torch's CPU thread count when the parent started, before it pinned itself to one thread.
_default_threads: int | None = None
_probe_child: int | None = None  # the pid of the child running the current probe
# Without fork (Windows) a probe runs in the runner itself, with none of the isolation above.
CAN_FORK = hasattr(os, "fork")


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def pin_torch_threads() -> None:
    """GNU OpenMP cannot start threads in a child forked from a process whose thread pool is
    running (the child's first parallel region hangs): the parent keeps torch on one thread
    and each child sets the real count."""
    import torch

    global _default_threads
    _default_threads = torch.get_num_threads()
    torch.set_num_threads(1)


def _forward_stack_dump(_signum: int, _frame: Any) -> None:
    """SIGUSR1 asks for the running Python stack: the probe's, not the idle parent's."""
    if _probe_child is not None:
        with contextlib.suppress(OSError):
            os.kill(_probe_child, signal.SIGUSR1)


class RequestChannel:
    """The client's request pipe, read without buffering so it can be watched with select.
    Only a pipe is watched: started by hand with stdin from a terminal or /dev/null, the
    runner has no client whose death it could notice."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.closed = False
        self._buffer = b""
        try:
            self.watched = stat.S_ISFIFO(os.fstat(fd).st_mode)
        except OSError:
            self.watched = False

    def watch_list(self) -> list[int]:
        return [self.fd] if self.watched and not self.closed else []

    def pump(self) -> None:
        """Read what is there (call when select says it is readable)."""
        try:
            data = os.read(self.fd, 65536)
        except OSError:
            data = b""
        if data:
            self._buffer += data
        else:
            self.closed = True

    def next_line(self) -> str | None:
        """The next request line; None once the client has gone."""
        while b"\n" not in self._buffer:
            if self.closed:
                return None
            if CAN_FORK:  # Windows' select takes sockets only: there the read just blocks
                select.select([self.fd], [], [])
            self.pump()
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", errors="replace")


class ClientGone(Exception):
    """The request pipe reached end of file: nobody is waiting for this worker any more."""


def process_table() -> dict[int, tuple[int, str]]:
    """pid → (parent pid, state) of every process, from /proc."""
    table: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                status_line = handle.read()
        except OSError:
            continue
        fields = status_line.rsplit(")", 1)[-1].split()  # the name may hold spaces and ")"
        if len(fields) > 1 and fields[1].isdigit():
            table[int(entry)] = (int(fields[1]), fields[0])
    return table


def live_descendants(root: int) -> list[int]:
    """Processes below `root` that are not yet zombies."""
    children: dict[int, list[int]] = {}
    states: dict[int, str] = {}
    for pid, (parent, state) in process_table().items():
        children.setdefault(parent, []).append(pid)
        states[pid] = state
    found: list[int] = []
    queue = list(children.get(root, []))
    while queue:
        pid = queue.pop()
        if states.get(pid) not in ("Z", "X"):
            found.append(pid)
        queue.extend(children.get(pid, []))
    return found


def kill_descendants(fallback: int | None) -> None:
    """Kill everything below this process and reap it. As a subreaper this process inherits
    the orphans, so a process that double-forked or left the session is still found. A scan
    can miss a process forked while it runs, so scans repeat until one finds nothing alive.
    Without /proc only `fallback` (the probe's child) can be named."""
    me = os.getpid()
    for _ in range(400):
        targets = live_descendants(me) if os.path.isdir("/proc") else [fallback] if fallback else []
        for pid in targets:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:  # reap: no zombies
                pass
        if not targets or not os.path.isdir("/proc"):
            return
        time.sleep(0.005)


def child_status_text(status: int) -> tuple[int, str]:
    """(exit code as the client reports it, negative for a signal; its description)."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return -number, f"was killed by {name}"
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    return code, f"exited with status {code}"


def bad_line_event(line: bytes) -> dict[str, Any] | None:
    """None when `line` is an event this relay passes on, else the protocol error it becomes."""
    try:
        data = json.loads(line)
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("event") in ("progress", "result", "error"):
        return None
    preview = line[:200].decode("utf-8", errors="replace").strip()
    return ProbeFailure("protocol", f"the runner wrote a non-JSON line: {preview!r}").to_event()


class ProbeRelay:
    """Reads one probe child's events and passes them to the client until the final one."""

    def __init__(self, pid: int, read_fd: int, events: EventStream, channel: RequestChannel):
        self.pid = pid
        self.read_fd = read_fd
        self.events = events
        self.channel = channel
        self._buffer = b""

    def run(self) -> dict[str, Any]:
        """The final event. Raises ClientGone when the request pipe closes meanwhile."""
        while True:
            readable, _, _ = select.select([self.read_fd, *self.channel.watch_list()], [], [])
            if self.channel.fd in readable:
                self.channel.pump()
                if self.channel.closed:
                    raise ClientGone()
            if self.read_fd not in readable:
                continue
            data = os.read(self.read_fd, 1 << 16)
            if not data:
                return self._ended_without_answer()
            self._buffer += data
            final = self._relay_lines()
            if final is not None:
                return final
            if len(self._buffer) > MAX_CHILD_LINE_BYTES:
                message = f"the runner wrote a line longer than {MAX_CHILD_LINE_BYTES} bytes"
                return ProbeFailure("flood", message).to_event()

    def _relay_lines(self) -> dict[str, Any] | None:
        while b"\n" in self._buffer:
            line, _, self._buffer = self._buffer.partition(b"\n")
            if not line.strip():
                continue
            bad = bad_line_event(line)
            if bad is not None:
                return bad
            event: dict[str, Any] = json.loads(line)
            event.pop("id", None)
            if event["event"] != "progress":
                return event
            self.events.emit(event)
        return None

    def _ended_without_answer(self) -> dict[str, Any]:
        """The child closed its event pipe: it exited (or it shut the pipe and went on)."""
        deadline = time.monotonic() + CHILD_EXIT_GRACE_S
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                code, how = child_status_text(status)
                failure = ProbeFailure("exited", f"the probe {how} before reporting a result")
                return {**failure.to_event(), "exit_code": code}
            readable, _, _ = select.select(self.channel.watch_list(), [], [], 0.01)
            if readable:
                self.channel.pump()
                if self.channel.closed:
                    raise ClientGone()
        message = "the probe closed its event pipe without reporting a result"
        return ProbeFailure("protocol", message).to_event()


def run_probe_child(
    request: ProbeRequest, event_fd: int, inherited: Iterable[int], parent: int
) -> None:
    """In the forked child: run the probe, write its events to `event_fd`, never return."""
    code = 2
    try:
        for fd in inherited:  # the client's channels belong to the parent alone
            with contextlib.suppress(OSError):
                os.close(fd)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the parent killed: the probe goes too
        if os.getppid() != parent:  # it died before the line above took effect
            return
        if hasattr(signal, "SIGUSR1"):
            signal.signal(signal.SIGUSR1, signal.SIG_DFL)
            faulthandler.register(signal.SIGUSR1, all_threads=True)
        code = 0 if run_request(request, EventStream(event_fd)) else 2
    finally:
        for stream in (sys.stdout, sys.stderr):  # the user's prints, for the stderr tail
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def supervise_probe(
    request: ProbeRequest, events: EventStream, channel: RequestChannel
) -> bool:
    """Run one probe in a fresh child and emit its final event. True when it gave a result.
    Raises ClientGone (after killing the probe) when the client went away meanwhile."""
    global _probe_child
    request.file = os.path.abspath(request.file)
    if not CAN_FORK:
        return run_request(request, events)
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()  # nothing buffered here may be written twice, by parent and child
    sys.stderr.flush()
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        events.emit(ProbeFailure("internal", f"cannot start the probe: {exc}").to_event())
        return False
    if pid == 0:
        os.close(read_fd)
        run_probe_child(request, write_fd, (events.fileno(), channel.fd), parent)
    os.close(write_fd)
    _probe_child = pid
    try:
        final = ProbeRelay(pid, read_fd, events, channel).run()
    except (BrokenPipeError, ConnectionResetError):
        raise ClientGone() from None  # the client's end of our stdout is closed
    finally:
        _probe_child = None
        os.close(read_fd)
        # before the answer: once the client has it, nothing of this probe may be running
        kill_descendants(pid)
    try:
        events.emit(final)
    except (BrokenPipeError, ConnectionResetError):
        raise ClientGone() from None
    return final.get("event") == "result"


def prepare_probe_process(request: ProbeRequest) -> None:
    """In the probe's child: where the user's code expects to run. The folder of the user's
    file (not of a copy of unsaved text) comes first on sys.path for its sibling imports, then
    the project root, as `python -m` from there would see it (import_roots.py)."""
    import torch

    origin = request.origin or request.file
    directory = os.path.dirname(os.path.abspath(origin))
    sys.path[:0] = companion_module("import_roots").import_roots(origin)
    with contextlib.suppress(OSError):
        os.chdir(request.cwd or directory)
    threads = request.threads or _default_threads
    if threads:
        torch.set_num_threads(threads)


def run_request(request: ProbeRequest, events: EventStream) -> bool:
    """Run one probe in this process and emit its final event. True when it gave a result."""
    import torch

    progress = Progress(events)
    prepare_probe_process(request)
    with torch.enable_grad():
        final = final_event(request, progress)
    events.emit(final)
    return bool(final["event"] == "result")


def final_event(request: ProbeRequest, progress: Progress) -> dict[str, Any]:
    try:
        return {"event": "result", "report": probe(request, progress)}
    except ProbeFailure as failure:
        if progress.outcomes is not None:
            progress.outcomes.annotate(failure, progress.current_stage)
        return failure.to_event()
    except Exception as exc:  # noqa: BLE001 - a bug in the runner must still end the probe
        trace = traceback.format_exc()[-MAX_TRACEBACK_CHARS:]
        message = f"torchdoctor runner failed: {type(exc).__name__}: {exc}"
        return ProbeFailure("internal", message, trace=trace).to_event()


def warm_up_torch() -> None:
    """Pay torch's lazy first-use costs (meta kernels and FlopCounterMode pull in dynamo,
    about 2 s) while the worker is idle rather than inside the first probe. On the CPU only:
    a parent that initialised CUDA could not fork children that use it. A backward is left to
    the probe where torch is built for a GPU: the autograd engine's first backward asks the
    GPU driver for its devices, and a child forked after that fails to initialise CUDA."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    built_for_gpu = torch.version.cuda is not None or torch.version.hip is not None
    layer = torch.nn.Linear(2, 2)
    with contextlib.suppress(Exception), FlopCounterMode(display=False):
        output = layer(torch.zeros(1, 2))
        if not built_for_gpu:
            output.sum().backward()
    with contextlib.suppress(Exception), parameters_on_meta(layer):
        layer(torch.zeros(1, 2, device="meta"))


def serve_worker(events: EventStream, channel: RequestChannel) -> int:
    import torch

    started = time.perf_counter()
    warm_up_torch()
    events.emit(
        {
            "event": "ready",
            "pid": os.getpid(),
            "python": sys.executable,
            "python_version": platform.python_version(),
            "torch_version": torch.__version__,
            "warm_up_seconds": round(time.perf_counter() - started, 3),
        }
    )
    while True:
        line = channel.next_line()
        if line is None:
            return 0
        if not line.strip():
            continue
        events.request_id = None
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise ValueError("a request is a JSON object")
            events.request_id = data.get("id")
            if data.get("op") == "shutdown":
                return 0
            request = ProbeRequest.from_json(data)
        except ProbeFailure as failure:
            events.emit(failure.to_event())
            continue
        except ValueError as exc:
            events.emit(ProbeFailure("usage", f"bad request: {exc}").to_event())
            continue
        try:
            supervise_probe(request, events, channel)
        except ClientGone:
            return 0
        events.request_id = None


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="runner", description="Probe a PyTorch model and print JSON-lines events."
    )
    parser.add_argument("--worker", action="store_true", help="serve JSON requests on stdin")
    parser.add_argument("--file", help="the Python file that defines the model")
    parser.add_argument("--target", help="class (or zero-argument function) to probe")
    parser.add_argument("--input", help='example input, e.g. "(8, 3, 224, 224)"')
    parser.add_argument("--device", choices=DEVICE_CHOICES, default="auto")
    parser.add_argument("--iters", type=int, default=DEFAULT_ITERS)
    parser.add_argument("--warmup", type=int, default=DEFAULT_WARMUP)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--timing-budget", type=float, default=DEFAULT_TIMING_BUDGET_S)
    parser.add_argument("--explain", action="store_true", help="report torch.compile breaks")
    parser.add_argument("--cwd", default=None, help="working directory for the user's code")
    parser.add_argument(
        "--origin", default=None, help="the user's file when --file is a copy of unsaved text"
    )
    parser.add_argument(
        "--memory-limit", type=int, default=None, help="address-space limit in bytes (CPU)"
    )
    parser.add_argument("--batch-sweep", default=None, help='"auto" or sizes such as "1,2,8"')
    parser.add_argument("--max-memory", type=int, default=None, help="sweep's cap in bytes")
    parser.add_argument("--init", default=None, help="JSON object of __init__ keyword arguments")
    parser.add_argument("--factory", default=None, help="module:function that returns the model")
    parser.add_argument("--dtype", default=None, help="model dtype: bfloat16, float16, float32")
    parser.add_argument(
        "--amp", action="store_true",
        help="forward under torch.autocast (bfloat16 on CPU, float16 on CUDA)",
    )
    parser.add_argument("--amp-dtype", default=None, help="autocast dtype: bfloat16 or float16")
    parser.add_argument("--channels-last", action="store_true", help="channels-last memory format")
    return parser.parse_args(argv)


def forget_runner_directory() -> None:
    """Started by its folder's path, Python puts that folder first on sys.path; the user's
    `import timing` or `import schema` must find neither the runner's modules nor the files
    next to it (__main__.py already dropped the folder; this covers any other start)."""
    ours = {RUNNER_DIR, PROBE_DIR}
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) not in ours]


def torch_missing() -> ProbeFailure | None:
    try:
        import torch  # noqa: F401 - the import is the check
    except Exception as exc:  # noqa: BLE001 - a broken torch raises all kinds of errors
        return ProbeFailure(
            "environment",
            f"torch cannot be imported by {sys.executable}: {type(exc).__name__}: {exc}",
        )
    return None


def main(argv: list[str] | None = None) -> int:
    # SIGUSR1 dumps every thread's Python stack to stderr: the client uses it to say which
    # line was running when a probe timed out; this process passes it on to the probe's
    # child. Fatal signals dump it too.
    faulthandler.enable()
    if hasattr(signal, "SIGUSR1"):
        signal.signal(signal.SIGUSR1, _forward_stack_dump)
    forget_runner_directory()
    # The parent forks every probe, and a child cannot use CUDA once the parent's process has
    # initialised the driver. torch.cuda.is_available(), which torch's own modules call on
    # import, initialises it unless this asks it to count devices through NVML instead.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    arguments = parse_arguments(sys.argv[1:] if argv is None else argv)
    events = take_over_stdout()
    channel = RequestChannel(take_over_stdin())
    missing = torch_missing()
    if missing is not None:
        events.emit(missing.to_event())
        return 2
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    pin_torch_threads()
    if arguments.worker:
        return serve_worker(events, channel)
    if not arguments.file or not arguments.target:
        events.emit(ProbeFailure("usage", "--file and --target are required").to_event())
        return 2
    request = ProbeRequest(
        file=arguments.file,
        target=arguments.target,
        input=arguments.input,
        device=arguments.device,
        iters=arguments.iters,
        warmup=arguments.warmup,
        threads=arguments.threads,
        explain=arguments.explain,
        timing_budget_s=arguments.timing_budget,
        cwd=arguments.cwd,
        origin=arguments.origin,
        memory_limit_bytes=arguments.memory_limit,
        batch_sweep=arguments.batch_sweep,
        max_memory_bytes=arguments.max_memory,
        factory=arguments.factory,
        dtype=arguments.dtype,
        amp=arguments.amp_dtype or ("auto" if arguments.amp else None),
        channels_last=arguments.channels_last,
    )
    try:
        if arguments.init is not None:
            request.init = companion_module("init_args").parse_init(arguments.init)
    except ValueError as exc:
        events.emit(ProbeFailure("usage", str(exc)).to_event())
        return 2
    try:
        request.validate()
    except ProbeFailure as failure:
        events.emit(failure.to_event())
        return 2
    try:
        return 0 if supervise_probe(request, events, channel) else 2
    except ClientGone:
        return 2
