"""What one probe's code starts cannot hang the probe, outlive it, answer for the next probe,
outlive a killed server, or see the server's environment; and only what the file defines can
be probed."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from torchdoctor.probe import cgroup
from torchdoctor.probe.client import ProbeLimits, WorkerPool, run_probe

from .conftest import (
    EXAMPLES,
    FIXTURES,
    PYTHON,
    LoopRunner,
    WarmProbe,
    copy_fixture,
    error_of,
    needs_torch,
    options,
    report_of,
)
from .test_isolation import processes_with

pytestmark = [needs_torch, pytest.mark.timeout(150)]

SETTLE_S = 10.0  # how long killed processes may take to disappear from /proc


def sleepers(duration: str) -> list[int]:
    """Live `sleep <duration>` processes."""
    wanted = b"sleep\x00" + duration.encode() + b"\x00"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if command.endswith(wanted) and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def settled(check: object, deadline_s: float = SETTLE_S) -> bool:
    """Polls `check()` (a callable) until it is true or the deadline passes."""
    deadline = time.monotonic() + deadline_s
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def leaves_session(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """leaves_session.py with a `sleep` duration no other process uses, and that duration."""
    duration = f"303.{secrets.randbelow(10**6):06d}"
    path = copy_fixture("leaves_session.py", tmp_path)
    path.write_text(path.read_text().replace('DURATION = "303"', f'DURATION = "{duration}"'))
    yield path, duration
    for pid in sleepers(duration):  # never leave one behind, whatever the test found
        os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def warm() -> Iterator[WarmProbe]:
    probe = WarmProbe(ProbeLimits(timeout_s=60))
    probe.runner.run(probe.pool.warm(PYTHON))
    yield probe
    probe.close()


# ---- a child in a session of its own -----------------------------------------------------------
def test_a_child_in_a_new_session_neither_hangs_a_fresh_probe_nor_outlives_it(
    loop_runner: LoopRunner, leaves_session: tuple[Path, str]
) -> None:
    """The child holds the runner's stderr pipe: waiting for that pipe to close never ended."""
    path, duration = leaves_session
    final = loop_runner.run(run_probe(PYTHON, options(path, "LeavesSession"), timeout_s=20), 60)
    assert report_of(final).params.total == 4 * 4 + 4
    assert settled(lambda: not sleepers(duration))


def test_a_child_in_a_new_session_is_killed_and_the_worker_stays_warm(
    warm: WarmProbe, leaves_session: tuple[Path, str]
) -> None:
    path, duration = leaves_session
    before = warm.pool.pid(PYTHON)
    assert report_of(warm.probe(path, "LeavesSession")).params.total == 4 * 4 + 4
    assert warm.pool.pid(PYTHON) == before
    assert settled(lambda: not sleepers(duration))
    # a pool closed with such a child about is not held up either
    pool = WorkerPool(ProbeLimits(timeout_s=60))
    report_of(warm.runner.run(pool.probe(PYTHON, options(path, "LeavesSession")), timeout=60))
    warm.runner.run(pool.close(), timeout=30)
    assert settled(lambda: not sleepers(duration))


def cgroups_can_be_made() -> bool:
    """Whether this machine lets the tests make a cgroup (a writable cgroup v2 hierarchy)."""
    stand_in = subprocess.Popen(["sleep", "60"])
    try:
        made = cgroup.RunnerCgroup.create(stand_in.pid)
        if made is not None:
            made.kill()
        return made is not None
    finally:
        stand_in.kill()
        stand_in.wait()


def cgroup_of(pid: int) -> str:
    text = Path(f"/proc/{pid}/cgroup").read_text(encoding="utf-8")
    return next(line[3:] for line in text.splitlines() if line.startswith("0::"))


@pytest.mark.skipif(not cgroups_can_be_made(), reason="needs a writable cgroup v2 hierarchy")
def test_where_cgroups_can_be_made_the_runner_and_all_it_starts_are_held_in_one(
    loop_runner: LoopRunner, leaves_session: tuple[Path, str]
) -> None:
    path, duration = leaves_session
    pool = WorkerPool(ProbeLimits(timeout_s=60))
    try:
        worker = loop_runner.run(pool.warm(PYTHON))
        held = cgroup_of(worker)
        assert held.endswith(f"/torchdoctor-probe-{worker}")
        assert report_of(loop_runner.run(pool.probe(PYTHON, options(path, "LeavesSession"))))
    finally:
        loop_runner.run(pool.close(), timeout=30)
    mount = cgroup._unified_mount()
    assert mount is not None and not (mount / held.lstrip("/")).exists()  # removed with it
    assert settled(lambda: not sleepers(duration))


# ---- nothing of one probe survives into the next -----------------------------------------------
def test_a_thread_left_by_one_probe_cannot_answer_for_the_next(
    warm: WarmProbe, tmp_path: Path
) -> None:
    first = warm.probe(copy_fixture("forges_next_report.py", tmp_path), "ForgesNextReport")
    assert report_of(first).target == "ForgesNextReport"
    (tmp_path / "go").write_text("the next probe is starting\n")
    second = report_of(warm.probe(EXAMPLES / "models.py", "SmallCNN"))
    assert second.target == "SmallCNN" and second.params.total > 0
    # the thread died with the first probe's process: it never even woke up
    assert not (tmp_path / "forging").exists()


def test_a_probe_does_not_see_what_an_earlier_one_changed(
    warm: WarmProbe, tmp_path: Path
) -> None:
    """An earlier probe patched torch itself; the next probe runs the real nn.Linear."""
    patcher = tmp_path / "patcher.py"
    patcher.write_text(
        "import torch\nfrom torch import nn\n\n"
        "nn.Linear.forward = lambda self, x: x * 0  # every later Linear would output zeros\n\n"
        "# torchdoctor: input=(2, 4)\n"
        "class Patcher(nn.Module):\n"
        "    def __init__(self) -> None:\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(4, 4)\n\n"
        "    def forward(self, x):\n"
        "        return self.fc(x)\n"
    )
    report_of(warm.probe(patcher, "Patcher"))
    plain = tmp_path / "plain.py"
    plain.write_text(
        "import torch\nfrom torch import nn\n\n"
        "# torchdoctor: input=(2, 4)\n"
        "class Plain(nn.Module):\n"
        "    def __init__(self) -> None:\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(4, 3)\n\n"
        "    def forward(self, x):\n"
        "        return self.fc(x)\n"
    )
    report = report_of(warm.probe(plain, "Plain"))
    assert report.modules[0].output_shapes == [[2, 3]]  # the patch would have kept (2, 4)
    assert report.flops.forward == 2 * 2 * 4 * 3  # one real matmul, 2 FLOPs per multiply-add


# ---- a killed server leaves nothing running ----------------------------------------------------
SERVER = """
import asyncio, sys
from torchdoctor.probe.client import ProbeOptions, WorkerPool

async def main() -> None:
    pool = WorkerPool()
    options = ProbeOptions(sys.argv[1], "SpawnsChild", iters=2, warmup=1, threads=1)
    await pool.probe(sys.executable, options)

asyncio.run(main())
"""


def test_a_looping_probe_stops_when_its_server_is_killed(tmp_path: Path) -> None:
    marker = f"TORCHDOCTOR_KILLED_SERVER={secrets.token_hex(8)}"
    name, value = marker.split("=")
    pids_file = tmp_path / "pids"
    environment = {**os.environ, name: value, "TORCHDOCTOR_TEST_PIDS": str(pids_file)}
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(FIXTURES / "spawns_child.py")], env=environment
    )
    try:
        assert settled(pids_file.exists, 90), "the probe never started"
        assert len(processes_with(marker)) >= 3  # the worker, its probe and the probe's child
        server.kill()  # kill -9: no shutdown, no clean-up code runs in it
        server.wait()
        assert settled(lambda: not processes_with(marker)), processes_with(marker)
    finally:
        server.kill()
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)


# ---- the interpreter's environment, not the server's -------------------------------------------
def test_the_probe_runs_in_the_interpreters_environment_not_the_servers(
    loop_runner: LoopRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "bundled" / "libs"  # what the editor puts on the server's PYTHONPATH
    (bundle / "pygls").mkdir(parents=True)
    (bundle / "pygls" / "__init__.py").write_text("")
    (bundle / "typing_extensions.py").write_text("BUNDLED = True\n")
    own = tmp_path / "users-own-path"  # what the user had on PYTHONPATH themselves
    own.mkdir()
    seen_file = tmp_path / "seen.json"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join((str(bundle), str(own))))
    monkeypatch.setenv("PYTHONUTF8", "1")
    monkeypatch.setenv("PYTHONIOENCODING", "utf-8")
    monkeypatch.setenv("TORCHDOCTOR_TEST_ENVIRONMENT", str(seen_file))

    probe = options(FIXTURES / "reports_environment.py", "ReportsEnvironment")
    report_of(loop_runner.run(run_probe(PYTHON, probe, timeout_s=60)))
    seen = json.loads(seen_file.read_text(encoding="utf-8"))
    assert seen["environ"].get("PYTHONPATH") == str(own)
    assert "PYTHONUTF8" not in seen["environ"] and "PYTHONIOENCODING" not in seen["environ"]
    assert str(bundle) not in seen["path"] and str(own) in seen["path"]
    assert not seen["typing_extensions"].startswith(str(bundle))


# ---- only what the file defines is a target ----------------------------------------------------
@pytest.mark.parametrize("target", ["os.abort", "abort", "Linear", "torch.nn.Linear"])
def test_a_target_the_file_does_not_define_is_refused(warm: WarmProbe, target: str) -> None:
    path = FIXTURES / "imports_callables.py"
    error = error_of(warm.probe(path, target))
    assert error.kind == "target", error  # refused: not run (os.abort would kill the probe)
    assert "not a class or factory function defined in" in error.message


@pytest.mark.parametrize(
    ("target", "width"), [("Small", 3), ("make_small", 2), ("Small.wide", 5)]
)
def test_classes_and_factories_of_the_file_are_targets(
    warm: WarmProbe, target: str, width: int
) -> None:
    report = report_of(warm.probe(FIXTURES / "imports_callables.py", target))
    assert report.params.total == 4 * width + width


# ---- a copy of unsaved text imports as the user's file would -----------------------------------
def test_a_copy_elsewhere_resolves_imports_from_the_users_package(
    warm: WarmProbe, tmp_path: Path
) -> None:
    package = tmp_path / "project" / "nets"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "layers.py").write_text("WIDTH = 6\n")
    text = (
        "import torch\nfrom torch import nn\n\nfrom .layers import WIDTH\n\n"
        "# torchdoctor: input=(2, 4)\n"
        "class Unsaved(nn.Module):\n"
        "    def __init__(self) -> None:\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(4, WIDTH)\n\n"
        "    def forward(self, x):\n"
        "        return self.fc(x)\n"
    )
    user_file = package / "model.py"
    user_file.write_text("this file on disk is out of date and does not even parse (\n")
    copy = tmp_path / "private" / "copy.py"  # where the editor's text was written
    copy.parent.mkdir()
    copy.write_text(text)
    probe = options(copy, "Unsaved", origin=str(user_file))
    report = report_of(warm.runner.run(warm.pool.probe(PYTHON, probe)))
    assert report.params.total == 4 * 6 + 6


def test_a_worker_without_torch_says_so(loop_runner: LoopRunner, tmp_path: Path) -> None:
    """The worker's own start-up error carries no request id, and still answers the probe."""
    venv = tmp_path / "no-torch"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    pool = WorkerPool(ProbeLimits(timeout_s=60))
    try:
        probe = options(EXAMPLES / "models.py", "SmallCNN")
        error = error_of(loop_runner.run(pool.probe(str(python), probe)))
    finally:
        loop_runner.run(pool.close())
    assert error.kind == "environment" and "torch cannot be imported" in error.message
