"""Language-server latency and memory, measured the way an editor feels them: a real
`torchdoctor serve` process over stdio, driven by a small schema-free JSON-RPC client.

- keystroke → diagnostics: single-character edits to a 3,000-line training file, each sent as an
  incremental didChange, timed until the publishDiagnostics for that version arrives;
- a burst of keystrokes at typing speed: how many analyses run, and how long after the last key
  its diagnostics arrive (edits that arrive during an analysis are coalesced into one run);
- hover p50/p99 after jedi's warm-up (notes, doc pages and jedi signatures);
- code action p50/p99 at findings;
- process start → first diagnostics;
- server RSS with 20 open documents.

`python -m bench.lsp_bench [--quick]` prints a markdown table; `python -m bench` includes it.
"""

from __future__ import annotations

import argparse
import compileall
import gc
import itertools
import json
import os
import queue
import random
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    from .corpus import make_dense_file, make_file
except ImportError:  # run as a script: python bench/lsp_bench.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.corpus import make_dense_file, make_file

SERVER = [sys.executable, "-m", "torchdoctor", "serve"]
CHECKOUT = Path(__file__).resolve().parent.parent
RUFF_SERVER = [str(Path(sys.executable).with_name("ruff")), "server"]
BIG_FILE_LINES = 3000
TIMEOUT = 120.0


def byte_compile(tree: Path) -> None:
    """Write the bytecode of every module of the tree's `server/` package before its server is
    started and timed. Python reuses bytecode at each start but, where PYTHONDONTWRITEBYTECODE
    is set (as on the bench machine), never writes it itself: a tree without it (a fresh
    worktree, a module edited since) compiles those modules again at every start, 0.13 s of a
    0.4 s start on 2026-12-05, which made an older worktree look slower than it was."""
    compileall.compile_dir(str(tree / "server"), quiet=1)


# ---- a schema-free JSON-RPC client over stdio ---------------------------------------------------
@dataclass
class Notification:
    received: float  # time.perf_counter() when the reader finished parsing it
    method: str
    params: Any


@dataclass
class StdioClient:
    command: list[str]
    env: dict[str, str] | None = None
    stderr: Any = subprocess.DEVNULL  # the server's log; a file to debug a run
    notifications: list[Notification] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=self.env,
        )
        self._ids = itertools.count(1)
        self._write_lock = threading.Lock()
        self._pending: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # -- sending
    def _send(self, message: dict[str, Any]) -> float:
        body = json.dumps(message).encode("utf-8")
        with self._write_lock:
            sent = time.perf_counter()
            assert self.process.stdin is not None
            self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            self.process.stdin.flush()
        return sent

    def notify(self, method: str, params: Any) -> float:
        return self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any, timeout: float = TIMEOUT) -> Any:
        identifier = next(self._ids)
        answer: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=1)
        self._pending[identifier] = answer
        self._send({"jsonrpc": "2.0", "id": identifier, "method": method, "params": params})
        message = answer.get(timeout=timeout)
        if "error" in message:
            raise RuntimeError(f"{method}: {message['error']}")
        return message.get("result")

    def timed_request(self, method: str, params: Any) -> tuple[float, Any]:
        started = time.perf_counter()
        result = self.request(method, params)
        return time.perf_counter() - started, result

    # -- receiving
    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            length = 0
            while True:
                line = stream.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            body = stream.read(length)
            # arrival is when the last byte is in, before this client decodes it: decoding the
            # 330 KB of 530 diagnostics takes Python's json a few milliseconds, the client's
            # cost rather than the server's (ruff's messages are timed the same way)
            received = time.perf_counter()
            message = json.loads(body)
            if "method" not in message:
                waiter = self._pending.pop(message.get("id"), None)
                if waiter is not None:
                    waiter.put(message)
            elif "id" in message:
                self._answer_server_request(message)
            else:
                with self._changed:
                    self.notifications.append(
                        Notification(received, message["method"], message.get("params"))
                    )
                    self._changed.notify_all()

    def _answer_server_request(self, message: dict[str, Any]) -> None:
        result: Any = None
        if message["method"] == "workspace/configuration":
            result = [None for _ in message["params"]["items"]]
        self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    def wait_for(self, predicate: Any, after: int = 0, timeout: float = TIMEOUT) -> Notification:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for note in self.notifications[after:]:
                    if predicate(note):
                        return note
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("the server did not send the expected notification")
                self._changed.wait(remaining)

    def diagnostics_for(self, uri: str, version: int, after: int = 0) -> Notification:
        return self.wait_for(
            lambda n: (
                n.method == "textDocument/publishDiagnostics"
                and n.params["uri"] == uri
                and n.params.get("version") == version
            ),
            after,
        )

    # -- session
    def initialize(self, settings: dict[str, Any], root: Path) -> None:
        capabilities = {
            "general": {"positionEncodings": ["utf-16"]},
            "window": {"workDoneProgress": True},
            "workspace": {"configuration": True, "workspaceEdit": {"documentChanges": True}},
            "textDocument": {
                "synchronization": {"didSave": True},
                "publishDiagnostics": {"versionSupport": True},
                "hover": {"contentFormat": ["markdown", "plaintext"]},
                "codeAction": {
                    "dataSupport": True,
                    "resolveSupport": {"properties": ["edit"]},
                    "codeActionLiteralSupport": {
                        "codeActionKind": {"valueSet": ["quickfix", "source.fixAll"]}
                    },
                },
                "codeLens": {},
            },
        }
        self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri(),
                "capabilities": capabilities,
                "initializationOptions": {"settings": settings},
            },
        )
        self.notify("initialized", {})

    def wait_until_loaded(self, uri: str) -> float:
        """When the whole server answers: the first answers come from its early front, and a
        code lens only from the server (lsp/early_start.py)."""
        self.request("textDocument/codeLens", {"textDocument": {"uri": uri}})
        return time.perf_counter()

    def open(self, uri: str, text: str, version: int = 1) -> float:
        return self.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": uri,
                    "languageId": "python",
                    "version": version,
                    "text": text,
                }
            },
        )

    def insert(self, uri: str, version: int, line: int, character: int, text: str) -> float:
        return self.change(uri, version, line, character, line, character, text)

    def change(
        self, uri: str, version: int, line: int, start: int, end_line: int, end: int, text: str
    ) -> float:
        return self.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [
                    {
                        "range": {
                            "start": {"line": line, "character": start},
                            "end": {"line": end_line, "character": end},
                        },
                        "text": text,
                    }
                ],
            },
        )

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def wait_idle(self, timeout: float = 300.0) -> None:
        """Until the server uses under 5% of a core over half a second (jedi's warm-up and
        look-ups in the background would otherwise be measured as edit latency)."""
        deadline = time.monotonic() + timeout
        previous = self.cpu_seconds()
        while time.monotonic() < deadline:
            time.sleep(0.5)
            current = self.cpu_seconds()
            if current - previous < 0.025:
                return
            previous = current

    def close(self) -> None:
        try:
            self.request("shutdown", None, timeout=30)
            self.notify("exit", None)
            self.process.wait(timeout=30)
        except Exception:
            self.process.kill()
            self.process.wait()


# ---- measurements -----------------------------------------------------------------------------
def percentiles(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": p99 * 1000,
        "max_ms": ordered[-1] * 1000,
        "n": float(len(ordered)),
    }


def _comment_edits(lines: list[str], count: int, seed: int) -> list[tuple[int, int, str]]:
    """Single-character edits: a `#` typed at the end of a line, then deleted again, so the file
    keeps its size; lines chosen at random through the file."""
    rng = random.Random(seed)
    candidates = [i for i, line in enumerate(lines) if line.strip() and not line.endswith("\\")]
    edits: list[tuple[int, int, str]] = []
    while len(edits) < count:
        line = rng.choice(candidates)
        end = len(lines[line])
        edits.append((line, end, "#"))  # type
        edits.append((line, end, ""))  # and delete
    return edits[:count]


def measure_keystrokes(client: StdioClient, uri: str, text: str, count: int) -> dict[str, Any]:
    lines = text.split("\n")
    latencies: list[float] = []
    version = 1
    for line, end, typed in _comment_edits(lines, count, seed=count):
        version += 1
        after = len(client.notifications)
        if typed:
            sent = client.insert(uri, version, line, end, typed)
        else:
            sent = client.change(uri, version, line, end, line, end + 1, "")
        note = client.diagnostics_for(uri, version, after)
        latencies.append(note.received - sent)
    return {"version": version, **percentiles(latencies)}


def measure_enter_keystrokes(
    client: StdioClient, uri: str, text: str, count: int, seed: int, version: int
) -> dict[str, Any]:
    """Enter at the end of a function's line in the file's first tenth, then the line break
    deleted again, in turn: each one moves every line below it, which a letter never does."""
    lines = text.split("\n")
    rng = random.Random(seed)
    inside = [i for i, line in enumerate(lines[: len(lines) // 10]) if line.startswith("    ")]
    latencies: list[float] = []
    collecting = gc.isenabled()
    gc.disable()  # as in measure_code_keystrokes: the client's collector would skew arrivals
    try:
        line = inside[0]
        for edit in range(count):
            version += 1
            after = len(client.notifications)
            if edit % 2 == 0:
                line = rng.choice(inside)
                sent = client.insert(uri, version, line, len(lines[line]), "\n")
            else:
                sent = client.change(uri, version, line, len(lines[line]), line + 1, 0, "")
            note = client.diagnostics_for(uri, version, after)
            latencies.append(note.received - sent)
    finally:
        if collecting:
            gc.enable()
    return {"version": version, **percentiles(latencies)}


def measure_burst(
    client: StdioClient, uri: str, text: str, version: int, keys: int, interval: float
) -> dict[str, Any]:
    """Type `keys` characters at one every `interval` seconds into one line."""
    line = next(i for i, value in enumerate(text.split("\n")) if value.startswith("def "))
    start = len(text.split("\n")[line])
    after = len(client.notifications)
    sent = 0.0
    for key in range(keys):
        version += 1
        sent = client.insert(uri, version, line, start + key, "#" if key == 0 else "x")
        time.sleep(interval)
    last = client.diagnostics_for(uri, version, after)
    runs = sum(
        1
        for n in client.notifications[after:]
        if n.method == "textDocument/publishDiagnostics" and n.params["uri"] == uri
    )
    # put the line back as it was
    version += 1
    after = len(client.notifications)
    client.change(uri, version, line, start, line, start + keys, "")
    client.diagnostics_for(uri, version, after)
    return {
        "keys": keys,
        "interval_ms": interval * 1000,
        "analyses_published": runs,
        "last_key_to_diagnostics_ms": (last.received - sent) * 1000,
        "version": version,
    }


def _positions(text: str, needles: list[str]) -> list[dict[str, int]]:
    found = []
    lines = text.split("\n")
    for number, line in enumerate(lines):
        for needle in needles:
            column = line.find(needle)
            if column >= 0:
                found.append({"line": number, "character": column + 1})
    return found


def measure_hovers(client: StdioClient, uri: str, text: str, count: int) -> dict[str, Any]:
    positions = _positions(text, [".backward(", ".view(", "F.relu", "DataLoader(", ".item("])
    rng = random.Random(1)
    for position in positions[:20]:  # warm-up: every kind once
        client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": position})
    latencies = []
    with_signature = 0
    for _ in range(count):
        position = rng.choice(positions)
        elapsed, result = client.timed_request(
            "textDocument/hover", {"textDocument": {"uri": uri}, "position": position}
        )
        latencies.append(elapsed)
        if result and "```python" in result["contents"]["value"]:
            with_signature += 1
    return {**percentiles(latencies), "with_jedi_signature": with_signature}


def measure_code_actions(client: StdioClient, uri: str, version: int, count: int) -> dict[str, Any]:
    note = client.wait_for(
        lambda n: (
            n.method == "textDocument/publishDiagnostics"
            and n.params["uri"] == uri
            and n.params.get("version") == version
        )
    )
    diagnostics = note.params["diagnostics"]
    rng = random.Random(2)
    latencies = []
    for _ in range(count):
        diagnostic = rng.choice(diagnostics)
        elapsed, _ = client.timed_request(
            "textDocument/codeAction",
            {
                "textDocument": {"uri": uri},
                "range": diagnostic["range"],
                "context": {"diagnostics": [diagnostic]},
            },
        )
        latencies.append(elapsed)
    return percentiles(latencies)


def measure_start(root: Path, text: str) -> dict[str, float]:
    client = StdioClient(SERVER)
    try:
        client.initialize({"hoverSignatures": False}, root)
        initialized = time.perf_counter()
        uri = (root / "start.py").as_uri()
        client.open(uri, text)
        note = client.diagnostics_for(uri, 1)
        loaded = client.wait_until_loaded(uri)
        return {
            "start_to_initialized_s": initialized - client.started,
            "start_to_first_diagnostics_s": note.received - client.started,
            "start_to_loaded_s": loaded - client.started,
            "idle_rss_mb": client.rss_mb(),
        }
    finally:
        client.close()


def measure_memory(root: Path, documents: int, lines: int) -> dict[str, float]:
    client = StdioClient(SERVER)
    try:
        client.initialize({"hoverSignatures": False}, root)
        for index in range(documents):
            uri = (root / f"open_{index}.py").as_uri()
            client.open(uri, make_file(lines, seed=1000 + index))
        for index in range(documents):
            client.diagnostics_for((root / f"open_{index}.py").as_uri(), 1)
        # CodeLens makes the server keep each document's outline too
        for index in range(documents):
            client.request(
                "textDocument/codeLens",
                {"textDocument": {"uri": (root / f"open_{index}.py").as_uri()}},
            )
        return {
            "documents": float(documents),
            "lines_each": float(lines),
            "rss_mb": client.rss_mb(),
        }
    finally:
        client.close()


def _code_edits(lines: list[str], count: int, seed: int) -> list[tuple[int, int, str]]:
    """Single-character edits in code: a letter typed at the end of the name an assignment in
    a function binds (`correct = 0` → `correctx = 0`), then deleted again. Each changes the
    tree of the function it is in, as typing does."""
    rng = random.Random(seed)
    candidates = []
    for number, line in enumerate(lines):
        stripped = line.lstrip()
        name = stripped.split(" = ", 1)[0]
        if line.startswith("    ") and " = " in stripped and name.isidentifier():
            candidates.append((number, len(line) - len(stripped) + len(name)))
    edits: list[tuple[int, int, str]] = []
    while len(edits) < count:
        line, column = rng.choice(candidates)
        edits.append((line, column, "x"))
        edits.append((line, column, ""))
    return edits[:count]


def measure_code_keystrokes(
    client: StdioClient, uri: str, text: str, count: int, seed: int, version: int = 1
) -> dict[str, Any]:
    lines = text.split("\n")
    latencies: list[float] = []
    # the client keeps every notification it read: its own collector, scanning a growing heap
    # in the reader thread, would delay the arrival times it records
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _timed_code_keystrokes(client, uri, lines, count, seed, version, latencies)
    finally:
        if collecting:
            gc.enable()


def _timed_code_keystrokes(
    client: StdioClient,
    uri: str,
    lines: list[str],
    count: int,
    seed: int,
    version: int,
    latencies: list[float],
) -> dict[str, Any]:
    for line, column, typed in _code_edits(lines, count, seed):
        version += 1
        after = len(client.notifications)
        if typed:
            sent = client.insert(uri, version, line, column, typed)
        else:
            sent = client.change(uri, version, line, column, line, column + 1, "")
        note = client.diagnostics_for(uri, version, after)
        latencies.append(note.received - sent)
    return {"version": version, **percentiles(latencies)}


def measure_dense_files(root: Path, edits: int) -> dict[str, Any]:
    """Keystroke → diagnostics on files dense with findings, by torchdoctor and by `ruff
    server` in the same run: the 3,000-line file with and without a trailing syntax error, and
    a 10,000-line one; start → first diagnostics on the 3,000-line file; a 40-key burst."""
    files = {
        "dense_3000": make_dense_file(3000, seed=3),
        "dense_3000_broken": make_dense_file(3000, seed=3, broken_tail=True),
        "dense_10000": make_dense_file(10000, seed=10),
    }
    results: dict[str, Any] = {}
    byte_compile(CHECKOUT)
    for server, command in (("torchdoctor", SERVER), ("ruff", RUFF_SERVER)):
        if not Path(command[0]).exists():
            continue
        for name, text in files.items():
            client = StdioClient(command)
            try:
                client.initialize({"hoverSignatures": False}, root)
                uri = (root / f"{name}.py").as_uri()
                client.open(uri, text)
                first = client.diagnostics_for(uri, 1)
                # typing is measured on the loaded server (start → loaded is a figure of its own)
                loaded = client.wait_until_loaded(uri) if server == "torchdoctor" else None
                figures = measure_code_keystrokes(client, uri, text, edits, seed=len(text))
                figures["findings"] = len(first.params["diagnostics"])
                figures["lines"] = text.count("\n")
                if name != "dense_3000_broken":
                    enter = measure_enter_keystrokes(
                        client, uri, text, max(2, edits // 5), len(text), figures["version"]
                    )
                    figures["version"] = enter["version"]
                    figures["enter_p50_ms"] = enter["p50_ms"]
                    figures["enter_p99_ms"] = enter["p99_ms"]
                if name == "dense_3000":
                    figures["start_to_first_diagnostics_s"] = first.received - client.started
                    if loaded is not None:
                        figures["start_to_loaded_s"] = loaded - client.started
                    burst = measure_burst(client, uri, text, figures["version"], 40, 0.025)
                    figures["burst_last_key_ms"] = burst["last_key_to_diagnostics_ms"]
                results[f"{server}:{name}"] = figures
            finally:
                client.close()
    return results


def dense_markdown(results: dict[str, Any]) -> str:
    rows = [
        "| file | server | findings | p50 | p99 | Enter p50 / p99 | start → first diagnostics "
        "(→ whole server) | last of 40 keys |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, figures in results.items():
        server, name = key.split(":")
        start = figures.get("start_to_first_diagnostics_s")
        loaded = figures.get("start_to_loaded_s")
        start_cell = "" if start is None else f"{start:.2f} s"
        if loaded is not None:
            start_cell += f" ({loaded:.2f} s)"
        burst = figures.get("burst_last_key_ms")
        enter = figures.get("enter_p50_ms")
        enter_cell = "" if enter is None else f"{enter:.1f} / {figures['enter_p99_ms']:.1f} ms"
        rows.append(
            f"| {name} ({figures['lines']:,} lines) | {server} | {figures['findings']} | "
            f"{figures['p50_ms']:.1f} ms | {figures['p99_ms']:.1f} ms | "
            f"{enter_cell} | "
            f"{start_cell} | "
            f"{'' if burst is None else f'{burst:.1f} ms'} |"
        )
    return "\n".join(rows)


def in_process_analysis_ms(text: str, repeats: int) -> float:
    from torchdoctor.analysis import Document, analyse

    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        analyse(Document.parse(text, "big.py"))
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def run_lsp_bench(quick: bool = False) -> dict[str, Any]:
    import tempfile

    edits = 20 if quick else 300
    hovers = 50 if quick else 300
    actions = 30 if quick else 200
    big = make_file(BIG_FILE_LINES, seed=BIG_FILE_LINES)
    results: dict[str, Any] = {"file_lines": big.count("\n")}
    byte_compile(CHECKOUT)
    with tempfile.TemporaryDirectory(prefix="torchdoctor-lsp-bench-") as folder:
        root = Path(folder)
        results["start"] = measure_start(root, make_file(300, seed=300))
        results["memory"] = measure_memory(root, 20, 300 if quick else 500)

        client = StdioClient(SERVER)
        try:
            client.initialize({"hoverSignatures": True, "interpreter": sys.executable}, root)
            uri = (root / "big.py").as_uri()
            client.open(uri, big)
            client.diagnostics_for(uri, 1)
            results["rss_with_big_file_mb"] = client.rss_mb()
            try:
                client.wait_for(
                    lambda n: (
                        n.method == "window/logMessage"
                        and "hover signatures" in n.params["message"]
                    ),
                    timeout=300,
                )
                results["jedi_warm"] = True
            except TimeoutError:
                results["jedi_warm"] = False
            client.wait_idle()
            # the same work in this process, just before: what the edits cost beyond analysis
            results["analysis_in_process_ms"] = in_process_analysis_ms(big, 3 if quick else 5)
            keystrokes = measure_keystrokes(client, uri, big, edits)
            results["keystroke"] = keystrokes
            burst = measure_burst(client, uri, big, keystrokes["version"], 40, 0.025)
            results["burst"] = burst
            results["code_action"] = measure_code_actions(client, uri, burst["version"], actions)
            results["hover"] = measure_hovers(client, uri, big, hovers)
            results["rss_after_big_file_mb"] = client.rss_mb()
        finally:
            client.close()
        results["dense"] = measure_dense_files(root, 40 if quick else 200)
    return results


def markdown(results: dict[str, Any]) -> str:
    keystroke, burst = results["keystroke"], results["burst"]
    hover, action = results["hover"], results["code_action"]
    start, memory = results["start"], results["memory"]
    rows = [
        "| measure | p50 | p99 | notes |",
        "|---|---|---|---|",
        f"| keystroke → diagnostics, {results['file_lines']:,}-line file | "
        f"{keystroke['p50_ms']:.1f} ms | {keystroke['p99_ms']:.1f} ms | "
        f"{keystroke['n']:.0f} single-character incremental edits; no debounce. One in-process "
        f"parse + analysis of the file: {results['analysis_in_process_ms']:.1f} ms |",
        f"| burst of {burst['keys']} keys, one every {burst['interval_ms']:.0f} ms | "
        f"{burst['last_key_to_diagnostics_ms']:.1f} ms | | last key → its diagnostics; "
        f"{burst['analyses_published']} analyses published for {burst['keys']} edits |",
        f"| hover (after warm-up) | {hover['p50_ms']:.1f} ms | {hover['p99_ms']:.1f} ms | "
        f"{hover['n']:.0f} hovers on findings and torch APIs; "
        f"{hover['with_jedi_signature']} with a jedi signature (jedi warm: "
        f"{'yes' if results.get('jedi_warm') else 'no'}) |",
        f"| code action at a finding | {action['p50_ms']:.1f} ms | {action['p99_ms']:.1f} ms | "
        f"{action['n']:.0f} requests, edits resolved lazily |",
        f"| process start → first diagnostics | {start['start_to_first_diagnostics_s']:.2f} s | | "
        f"300-line file; start → initialized {start['start_to_initialized_s']:.2f} s; → the "
        f"whole server answers (hovers, code actions) {start['start_to_loaded_s']:.2f} s |",
        f"| server RSS | {memory['rss_mb']:.0f} MB | | {memory['documents']:.0f} open documents of "
        f"{memory['lines_each']:.0f} lines; idle after start {start['idle_rss_mb']:.0f} MB; the "
        f"{results['file_lines']:,}-line file open: {results['rss_with_big_file_mb']:.0f} MB "
        f"(jedi warming), after jedi is warm on torch: {results['rss_after_big_file_mb']:.0f} MB |",
    ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    parser.add_argument(
        "--dense-only", action="store_true", help="only the dense files, with ruff beside"
    )
    args = parser.parse_args(argv)
    if args.dense_only:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="torchdoctor-lsp-bench-") as folder:
            dense = measure_dense_files(Path(folder), 40 if args.quick else 200)
        if args.json:
            args.json.write_text(json.dumps(dense, indent=2))
        print(dense_markdown(dense))
        return 0
    results = run_lsp_bench(args.quick)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print(markdown(results))
    print()
    print(dense_markdown(results["dense"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
