"""The probe runs workspace code only when asked, never through a shell, and contains user code
that misbehaves: each case ends in one clear error, leaves no process behind, and the next probe
in the same pool works."""

from __future__ import annotations

import ast
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from torchdoctor.probe import client as probe_client
from torchdoctor.probe.client import (
    ProbeArgumentError,
    ProbeLimits,
    ProbeOptions,
    WorkerPool,
    run_probe,
)
from torchdoctor.probe.schema import ResultEvent

from .conftest import (
    EXAMPLES,
    FIXTURES,
    PYTHON,
    LoopRunner,
    error_of,
    marked_lines,
    needs_torch,
    options,
    report_of,
)

pytestmark = [needs_torch, pytest.mark.timeout(120)]

MARKER = "TORCHDOCTOR_ISOLATION_TEST"
MEMORY_CAP = 1536 * 1024 * 1024  # room for torch, far below this machine's memory
OUTPUT_CAP = 1024 * 1024
IMPORTED = "TORCHDOCTOR_TEST_IMPORTED"  # where runs_on_import.py leaves its mark


def processes_with(marker: str) -> set[int]:
    """Live (non-zombie) processes whose environment carries `marker`: the pool's worker and
    everything started under it inherit it, whatever process group they moved to."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker.encode() in environ and state not in ("Z", "X"):
            found.add(int(entry.name))
    return found


class Pool:
    """One warm worker pool for the module, its loop, and the marker its processes carry."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.runner = LoopRunner()
        limits = ProbeLimits(
            timeout_s=60, memory_limit_bytes=MEMORY_CAP, max_user_output_bytes=OUTPUT_CAP
        )
        self.pool = WorkerPool(limits)

    def probe(self, path: Path, target: str, timeout_s: float | None = None, **extra: object):
        return self.runner.run(
            self.pool.probe(PYTHON, options(path, target, **extra), timeout_s=timeout_s)
        )

    def assert_nothing_left(self) -> None:
        """Only the pool's own worker (when it is alive) may carry the marker; processes just
        killed may take a moment to go."""
        allowed = {self.pool.pid(PYTHON)} - {None}
        deadline = time.monotonic() + 10
        while (left := processes_with(self.marker) - allowed) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not left, f"processes left behind: {sorted(left)}"

    def assert_still_works(self) -> None:
        report = report_of(self.probe(EXAMPLES / "models.py", "SmallCNN"))
        assert report.params.total > 0
        self.assert_nothing_left()

    def close(self) -> None:
        self.runner.run(self.pool.close())
        self.runner.close()


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    marker = f"{MARKER}={uuid.uuid4().hex}"
    name, value = marker.split("=")
    # inherited by the worker the pool starts, and by everything started under it
    environment = {name: value, IMPORTED: str(tmp_path_factory.mktemp("imports") / "imported")}
    os.environ.update(environment)
    try:
        warm = Pool(marker)
        warm.runner.run(warm.pool.warm(PYTHON))
        yield warm
        warm.close()
        assert processes_with(marker) == set()
    finally:
        for key in environment:
            del os.environ[key]


# ---- workspace code runs only on request, never through a shell --------------------------------
def test_client_starts_the_runner_without_a_shell() -> None:
    """Read how client.py starts processes: argument lists only."""
    tree = ast.parse(Path(probe_client.__file__).read_text(encoding="utf-8"))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    names = {ast.unparse(call.func) for call in calls}
    assert "asyncio.create_subprocess_exec" in names
    shell_calls = {"asyncio.create_subprocess_shell", "os.system", "os.popen", "subprocess.run"}
    assert not names & shell_calls
    for call in calls:
        for keyword in call.keywords:
            assert keyword.arg != "shell", ast.unparse(call)


def test_nothing_runs_until_a_probe_is_asked_for(pool: Pool) -> None:
    imported = Path(os.environ[IMPORTED])
    path = FIXTURES / "runs_on_import.py"
    ProbeOptions(str(path), "RunsOnImport").validated()
    pool.runner.run(pool.pool.warm(PYTHON))
    assert not imported.exists()  # validating and warming up never import the user's file
    assert isinstance(pool.probe(path, "RunsOnImport"), ResultEvent)
    assert imported.read_text() == "imported\n"


@pytest.mark.parametrize(
    "target", ["Net; rm -rf x", "$(touch pwned)", "Net && touch pwned", "`touch pwned`", "a|b"]
)
def test_shell_metacharacters_in_the_target_are_refused(target: str) -> None:
    with pytest.raises(ProbeArgumentError):
        ProbeOptions(str(EXAMPLES / "models.py"), target).validated()


def test_shell_metacharacters_in_the_input_are_refused_or_taken_literally(
    pool: Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for spec in ("$(touch pwned)", "(2, 4) && touch pwned", "`touch pwned`", "(2,4) > pwned"):
        with pytest.raises(ProbeArgumentError):
            ProbeOptions(str(EXAMPLES / "models.py"), "SmallCNN", input_spec=spec).validated()
    # ";" and words pass the character check; the runner reads them as an input and refuses
    spec = "(2, 4); touch pwned"
    error = error_of(pool.probe(EXAMPLES / "models.py", "SmallCNN", input_spec=spec))
    assert error.kind == "usage"
    assert not (tmp_path / "pwned").exists()


def test_a_file_name_with_shell_metacharacters_is_passed_as_it_is(
    loop_runner: LoopRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh runner gets the path as one argument: the name is not interpreted."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "$(touch pwned); x"
    folder.mkdir()
    model = folder / "model `touch pwned2`.py"
    model.write_text((FIXTURES / "hard_exit.py").read_text().replace("os._exit(7)", "return x"))
    final = loop_runner.run(run_probe(PYTHON, options(model, "HardExit"), timeout_s=60))
    assert report_of(final).params.total == 4 * 4 + 4
    assert not any(tmp_path.glob("pwned*")) and not any(folder.glob("pwned*"))


# ---- misbehaving user code ---------------------------------------------------------------------
def test_a_model_that_hangs_is_stopped_at_the_time_out(pool: Pool) -> None:
    path = FIXTURES / "endless.py"
    error = error_of(pool.probe(path, "Endless", timeout_s=3))
    assert error.kind == "timeout" and "did not finish within 3 s" in error.message
    assert error.line in marked_lines(path, "error-here")
    pool.assert_nothing_left()
    pool.assert_still_works()


def test_a_model_that_prints_without_end_is_stopped_by_the_output_cap(pool: Pool) -> None:
    path = FIXTURES / "prints_forever.py"
    started = time.monotonic()
    error = error_of(pool.probe(path, "PrintsForever", timeout_s=50))
    assert error.kind == "flood", error
    assert f"printed more than {OUTPUT_CAP} bytes" in error.message
    assert time.monotonic() - started < 40  # the cap stopped it, not the time-out
    assert error.stderr_tail and "step xxx" in error.stderr_tail
    pool.assert_nothing_left()
    pool.assert_still_works()


def test_text_that_is_not_json_on_stdout_does_not_reach_the_event_stream(pool: Pool) -> None:
    """The runner keeps stdout for events: the model's prints, a forged event and bytes that
    are not UTF-8 end up in the stderr tail, and the report is the real one."""
    final = pool.probe(FIXTURES / "prints_invalid_json.py", "PrintsInvalidJson")
    assert report_of(final).params.total == 4 * 3 + 3
    pool.assert_nothing_left()


def test_garbage_written_into_the_event_pipe_is_a_protocol_error(pool: Pool) -> None:
    error = error_of(pool.probe(FIXTURES / "writes_event_pipe.py", "WritesEventPipe"))
    assert error.kind == "protocol" and "non-JSON line" in error.message
    assert "this is not an event" in error.message
    pool.assert_nothing_left()
    pool.assert_still_works()


def test_children_that_would_outlive_the_probe_are_killed(pool: Pool) -> None:
    before = pool.pool.pid(PYTHON)
    final = pool.probe(FIXTURES / "leaves_children.py", "LeavesChildren")
    assert isinstance(final, ResultEvent)  # the probe itself went fine
    assert pool.pool.pid(PYTHON) == before  # and the worker stays warm
    pool.assert_nothing_left()
    pool.assert_still_works()


def test_memory_without_bound_hits_the_cap_and_is_reported(pool: Pool) -> None:
    path = FIXTURES / "grows_without_bound.py"
    error = error_of(pool.probe(path, "GrowsWithoutBound"))
    assert error.kind == "oom", error
    assert error.file == str(path) and error.line in marked_lines(path, "error-here")
    pool.assert_nothing_left()
    pool.assert_still_works()


def test_a_model_that_exits_early_is_reported_with_its_status(pool: Pool) -> None:
    error = error_of(pool.probe(FIXTURES / "hard_exit.py", "HardExit"))
    assert error.kind == "exited" and error.exit_code == 7 and "status 7" in error.message
    pool.assert_nothing_left()
    pool.assert_still_works()


def test_the_memory_cap_is_not_confused_with_a_cold_start(loop_runner: LoopRunner) -> None:
    """A fresh runner under the same cap imports torch and probes a small model."""
    limits = ProbeLimits(timeout_s=60, memory_limit_bytes=MEMORY_CAP)
    probe = options(EXAMPLES / "models.py", "SmallCNN")
    final = loop_runner.run(run_probe(PYTHON, probe, limits=limits))
    assert report_of(final).params.total > 0
