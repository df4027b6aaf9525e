"""Broken user code and misbehaving runners: one clear error event each, nothing left behind,
and the calling process carries on."""

from __future__ import annotations

import asyncio
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from torchdoctor.probe.client import (
    ProbeArgumentError,
    ProbeLimits,
    ProbeOptions,
    process_group_alive,
    run_probe,
    stream_probe,
)
from torchdoctor.probe.schema import ErrorEvent, ProgressEvent, ResultEvent

from .conftest import (
    EXAMPLES,
    FIXTURES,
    PYTHON,
    LoopRunner,
    WarmProbe,
    copy_fixture,
    error_of,
    marked_line,
    marked_lines,
    needs_torch,
    options,
)

pytestmark = [needs_torch, pytest.mark.timeout(120)]


def assert_points_at(error: ErrorEvent, path: Path) -> None:
    assert error.file == str(path), error
    assert error.line in marked_lines(path, "error-here"), error


@pytest.mark.parametrize(
    ("fixture", "target", "kind", "words"),
    [
        ("init_raises.py", "InitRaises", "init", "KeyError"),
        ("forward_raises.py", "ForwardRaises", "forward", "mat1 and mat2 shapes"),
        ("huge_alloc.py", "HugeAlloc", "oom", "can't allocate memory"),
        ("exits.py", "Net", "exit", "__main__"),
    ],
)
def test_broken_model_code_gives_one_error_at_the_users_line(
    warm: WarmProbe, fixture: str, target: str, kind: str, words: str
) -> None:
    path = FIXTURES / fixture
    events: list[object] = []
    final = warm.runner.run(
        warm.pool.probe(PYTHON, options(path, target), on_event=events.append)
    )
    error = error_of(final)
    assert error.kind == kind and words in error.message
    assert_points_at(error, path)
    assert [e for e in events if not isinstance(e, ProgressEvent)] == [error]


def test_the_worker_survives_errors_in_user_code(warm: WarmProbe) -> None:
    before = warm.pool.pid(PYTHON)
    error_of(warm.probe(FIXTURES / "forward_raises.py", "ForwardRaises"))
    assert warm.pool.pid(PYTHON) == before
    assert isinstance(warm.probe(FIXTURES / "inputs.py", "LightningStyle"), ResultEvent)
    assert warm.pool.pid(PYTHON) == before


def test_syntax_error_points_at_the_line(warm: WarmProbe, tmp_path: Path) -> None:
    path = copy_fixture("broken_syntax.py.txt", tmp_path, "broken_syntax.py")
    error = error_of(warm.probe(path, "Broken"))
    assert error.kind == "syntax" and "SyntaxError" in error.message
    assert error.file == str(path)
    assert error.line == marked_line(path, "error-here") - 1  # the unclosed parenthesis


def test_unknown_target_lists_the_models_in_the_file(warm: WarmProbe) -> None:
    error = error_of(warm.probe(FIXTURES / "inputs.py", "Missing"))
    assert error.kind == "target" and "TokensAndMask" in error.message


def wait_for_pids(path: Path, timeout: float = 60.0) -> tuple[int, int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if text.endswith("\n"):
            group, child = map(int, text.split())
            return group, child
        time.sleep(0.05)
    raise AssertionError("the fixture never wrote its process ids")


def process_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


async def probe_until_pids(
    pids_file: Path, cancel: asyncio.Event | None, on_event: Any = None
) -> tuple[asyncio.Task[object], tuple[int, int]]:
    probe = options(FIXTURES / "spawns_child.py", "SpawnsChild")
    task = asyncio.ensure_future(run_probe(PYTHON, probe, cancel=cancel, on_event=on_event))
    loop = asyncio.get_running_loop()
    ids = await loop.run_in_executor(None, wait_for_pids, pids_file)
    return task, ids


def test_cancel_kills_the_runner_and_its_children(
    loop_runner: LoopRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids_file = tmp_path / "pids"
    monkeypatch.setenv("TORCHDOCTOR_TEST_PIDS", str(pids_file))
    cancel = asyncio.Event()
    seen: list[object] = []
    task, (group, child) = loop_runner.run(probe_until_pids(pids_file, cancel, seen.append))
    assert process_group_alive(group) and process_running(child)
    cancel.set()
    error = error_of(loop_runner.run(task))  # type: ignore[arg-type]
    assert error.kind == "cancelled" and seen[-1] is error
    assert not process_group_alive(group)
    assert not process_running(child)


def test_cancelling_the_task_also_leaves_no_process(
    loop_runner: LoopRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids_file = tmp_path / "pids"
    monkeypatch.setenv("TORCHDOCTOR_TEST_PIDS", str(pids_file))

    async def start_then_cancel() -> int:
        task, (group, _child) = await probe_until_pids(pids_file, None)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return group

    group = loop_runner.run(start_then_cancel())
    assert not process_group_alive(group)


def test_a_runner_that_dies_is_reported_with_its_exit_status(loop_runner: LoopRunner) -> None:
    async def collect() -> list[object]:
        async with stream_probe(PYTHON, options(FIXTURES / "hard_exit.py", "HardExit")) as events:
            return [event async for event in events]

    events = loop_runner.run(collect())
    *progress, error = events
    assert progress and all(isinstance(event, ProgressEvent) for event in progress)
    assert isinstance(error, ErrorEvent)
    assert error.kind == "exited" and error.exit_code == 7
    assert "status 7" in error.message


def test_memory_cap_turns_a_big_allocation_into_an_oom_error(loop_runner: LoopRunner) -> None:
    path = FIXTURES / "big_alloc.py"
    limits = ProbeLimits(memory_limit_bytes=1536 * 1024 * 1024, timeout_s=60)
    error = error_of(loop_runner.run(run_probe(PYTHON, options(path, "BigAlloc"), limits=limits)))
    assert error.kind == "oom"
    assert_points_at(error, path)


def fake_interpreter(tmp_path: Path, body: str) -> str:
    """An executable standing in for Python: it ignores the runner and does `body`."""
    script = tmp_path / "fake-python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


@pytest.mark.parametrize(
    ("body", "kind", "words"),
    [
        ("echo 'Traceback: not an event'; sleep 30", "protocol", "non-JSON"),
        ('echo \'{"event": "progress", "stage": "load", "message": "", "percent": 1}\'; '
         "echo 'ModuleNotFoundError: no runner here' >&2; exit 3", "exited", "status 3"),
        ("head -c 3000000 /dev/zero | tr '\\0' x; sleep 30", "flood", "longer than"),
        ("while :; do echo '{\"event\": \"progress\", \"stage\": \"load\", \"message\": \"\", "
         "\"percent\": 1}'; done", "flood", "more than"),
    ],
)
def test_misbehaving_runner_gives_a_clear_error(
    loop_runner: LoopRunner, tmp_path: Path, body: str, kind: str, words: str
) -> None:
    python = fake_interpreter(tmp_path, body)
    limits = ProbeLimits(timeout_s=20, max_line_bytes=256 * 1024, max_output_bytes=512 * 1024)
    probe = options(EXAMPLES / "models.py", "SmallCNN")
    started = time.monotonic()
    error = error_of(loop_runner.run(run_probe(python, probe, limits=limits)))
    assert error.kind == kind and words in error.message, error
    assert time.monotonic() - started < 15  # stopped at once, not by the time-out
    if kind == "exited":
        assert error.exit_code == 3 and "no runner here" in error.message


def test_missing_interpreter_and_bad_options(loop_runner: LoopRunner, tmp_path: Path) -> None:
    probe = options(EXAMPLES / "models.py", "SmallCNN")
    error = error_of(loop_runner.run(run_probe(str(tmp_path / "no-python"), probe)))
    assert error.kind == "spawn"
    for bad in (
        ProbeOptions(str(tmp_path / "missing.py"), "Net"),
        ProbeOptions(str(EXAMPLES / "models.py"), "Small CNN; rm -rf /"),
        ProbeOptions(str(EXAMPLES / "models.py"), "SmallCNN", device="tpu"),
        ProbeOptions(str(EXAMPLES / "models.py"), "SmallCNN", iters=0),
        ProbeOptions(str(EXAMPLES / "models.py"), "SmallCNN", input_spec="$(reboot)"),
    ):
        with pytest.raises(ProbeArgumentError):
            bad.validated()


def test_unreadable_input_spec_is_a_usage_error(warm: WarmProbe) -> None:
    error = error_of(warm.probe(EXAMPLES / "models.py", "SmallCNN", input_spec="(8, three)"))
    assert error.kind == "usage" and "(8, 3, 224, 224)" in error.message


def test_timeout_names_the_running_line_and_kills_the_worker(warm: WarmProbe) -> None:
    """Last in this file: it kills the module's warm worker (the pool starts a new one)."""
    path = FIXTURES / "endless.py"
    pid = warm.runner.run(warm.pool.warm(PYTHON))  # torch imported: the loop starts at once
    probe = warm.pool.probe(PYTHON, options(path, "Endless"), timeout_s=4)
    error = error_of(warm.runner.run(probe))
    assert error.kind == "timeout" and "endless.py" in error.message
    assert_points_at(error, path)
    assert not process_group_alive(pid)
    assert warm.pool.pid(PYTHON) is None  # replaced on the next probe
