"""`check --fix` never loses a file: atomic replacement, contained symlinks, clean interruption."""

from __future__ import annotations

import errno
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from torchdoctor import cli
from torchdoctor.analysis import Config
from torchdoctor.reporting import atomic_write
from torchdoctor.reporting.atomic_write import TEMPORARY_SUFFIX, write_atomically
from torchdoctor.reporting.checking import check_source

BUGGY = """\
import torch

for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
"""
FIXED_LINE = "    optimizer.zero_grad()\n"
LINUX = sys.platform.startswith("linux")


def fixed(text: str) -> str:
    return check_source(text.encode(), "x.py", Config(), "fix", False).fixed_text


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(f"*{TEMPORARY_SUFFIX}"))


@pytest.fixture
def full_disk_on_temporary_write(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Every write to a temporary file of the atomic writer stores half its bytes and then
    fails with ENOSPC, as a file system that runs out of space mid-write does."""
    real_write, real_open = os.write, os.open
    temporary: set[int] = set()
    failures: list[int] = []

    def open_file(path: str | Path, flags: int, mode: int = 0o777) -> int:
        descriptor = real_open(path, flags, mode)
        if str(path).endswith(TEMPORARY_SUFFIX):
            temporary.add(descriptor)
        return descriptor

    def write(descriptor: int, data: bytes | memoryview) -> int:
        if descriptor in temporary:
            real_write(descriptor, bytes(data[: len(data) // 2]))
            failures.append(descriptor)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(descriptor, data)

    monkeypatch.setattr(atomic_write.os, "open", open_file)
    monkeypatch.setattr(atomic_write.os, "write", write)
    yield failures


def test_a_failed_write_leaves_the_original_byte_for_byte(
    tmp_path: Path, full_disk_on_temporary_write: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "train.py"
    original = (BUGGY + "# ünïcode tail\n" * 2000).encode()
    path.write_bytes(original)

    exit_code = cli.main(["check", "--fix", "--no-color", str(path)])

    assert full_disk_on_temporary_write, "the fixed text never reached the disk"
    assert path.read_bytes() == original
    assert leftovers(tmp_path) == []
    assert exit_code == 2
    assert "No space left on device; the file was left as it was" in capsys.readouterr().err


def test_an_interruption_as_the_temporary_file_is_created_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C or SIGTERM handled the moment the temporary file comes into being, before the
    writer holds its descriptor (Python runs a signal handler as the `open` call returns)."""
    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    real_open = os.open

    def interrupted_open(name: str | Path, flags: int, mode: int = 0o777) -> int:
        descriptor = real_open(name, flags, mode)
        if str(name).endswith(TEMPORARY_SUFFIX):
            os.close(descriptor)
            raise KeyboardInterrupt
        return descriptor

    monkeypatch.setattr(atomic_write.os, "open", interrupted_open)
    with pytest.raises(KeyboardInterrupt):
        write_atomically(path, b"new\n")
    assert path.read_text() == BUGGY
    assert leftovers(tmp_path) == []


def test_the_writer_keeps_the_mode_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    path.chmod(0o751)
    write_atomically(path, b"new\n")
    assert path.read_bytes() == b"new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert leftovers(tmp_path) == []


def test_fix_keeps_the_mode_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    path.chmod(0o640)
    assert cli.main(["check", "--fix", "-q", str(path)]) == 0
    assert FIXED_LINE in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_a_symlink_inside_the_tree_is_fixed_through_and_stays_a_link(tmp_path: Path) -> None:
    (tmp_path / "real.py").write_text(BUGGY)
    (tmp_path / "alias.py").symlink_to("real.py")
    assert cli.main(["check", "--fix", "-q", str(tmp_path / "alias.py")]) == 0
    assert (tmp_path / "alias.py").is_symlink()
    assert (tmp_path / "real.py").read_text() == fixed(BUGGY)


def test_a_symlink_out_of_the_checked_tree_is_reported_and_not_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "elsewhere" / "library.py"
    outside.parent.mkdir()
    outside.write_text(BUGGY)
    project = tmp_path / "project"
    project.mkdir()
    (project / "link.py").symlink_to(outside)
    (project / "own.py").write_text(BUGGY)

    exit_code = cli.main(["check", "--fix", "--no-color", str(project)])

    assert outside.read_text() == BUGGY
    assert (project / "own.py").read_text() == fixed(BUGGY)
    assert exit_code == 2
    err = capsys.readouterr().err
    assert "link.py: a symbolic link to" in err and "outside the checked folders" in err


def test_a_file_changed_after_it_was_read_is_not_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An editor saving the file while `check --fix` analyses it: the save wins."""
    from torchdoctor.reporting import checking

    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    real_check_source = checking.check_source

    def check_then_save(*args: object, **kwargs: object) -> checking.SourceResult:
        outcome = real_check_source(*args, **kwargs)  # type: ignore[arg-type]
        path.write_text(BUGGY + "# saved by the editor meanwhile\n")
        return outcome

    monkeypatch.setattr(checking, "check_source", check_then_save)
    assert cli.main(["check", "--fix", str(path)]) == 2
    assert path.read_text().endswith("# saved by the editor meanwhile\n")
    assert "changed on disk while it was checked" in capsys.readouterr().err


def _mount_tmpfs(folder: Path, size: str) -> str | None:
    """Mount a tmpfs of `size` on `folder`; None, or why it could not be done."""
    if not LINUX or os.geteuid() != 0:
        return "a tmpfs can only be mounted by root on Linux"
    folder.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    return None if done.returncode == 0 else f"mount refused: {done.stderr.strip()}"


def _fill(folder: Path) -> None:
    """Take every free block of the file system `folder` is on."""
    with (folder / "filler").open("wb", buffering=0) as filler:
        try:
            while True:
                filler.write(b"\0" * 4096)
        except OSError as error:
            assert error.errno == errno.ENOSPC


def test_a_real_full_disk_leaves_the_original_intact(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    refused = _mount_tmpfs(disk, "256k")
    if refused is not None:
        pytest.skip(f"no small file system to fill: {refused}")
    try:
        path = disk / "train.py"
        # 200 loops, each fix adds a line: the fixed text is over 4 KiB longer than the file,
        # so with the disk full it cannot be written, not even over the truncated original
        original = (BUGGY * 200 + 'PADDING = """' + "x" * 60_000 + '"""\n').encode()
        path.write_bytes(original)
        assert len(fixed(original.decode())) - len(original) > 4096
        _fill(disk)
        done = subprocess.run(
            [sys.executable, "-m", "torchdoctor", "check", "--fix", str(path)],
            capture_output=True,
            timeout=120,
        )
        assert path.read_bytes() == original
        assert leftovers(disk) == []
        assert done.returncode == 2
        assert b"No space left on device" in done.stderr
        assert b"Traceback" not in done.stderr
    finally:
        subprocess.run(["umount", str(disk)], check=False)


# ---- interruption ----------------------------------------------------------------------------

FILES = 300
# a realistic bulk per file, so that analysing the folder takes a while on two workers: about
# a second from the first file written to the last on two cores, time enough for the test to
# stop the parent in between even when other tests load the machine
BODY = BUGGY + "".join(
    f"\n\ndef helper_{n}(x, scale={n}):\n    y = x * scale\n    return y.sum()\n"
    for n in range(150)
)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _wait_for(condition: Callable[[], bool], what: str, polls: int = 12_000) -> None:
    """Poll `condition` every 10 ms (a guard against hanging, not a timing assertion)."""
    for _ in range(polls):
        if condition():
            return
        time.sleep(0.01)
    pytest.fail(f"never happened: {what}")


def _fixed_files(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("t*.py") if FIXED_LINE in p.read_text()}


def _start_fixing(folder: Path) -> subprocess.Popen[bytes]:
    for n in range(FILES):
        (folder / f"t{n:03}.py").write_text(BODY)
    process = subprocess.Popen(
        [sys.executable, "-m", "torchdoctor", "check", "--fix", "-q", "-j", "2", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    # files are written in order: the first one fixed means the parent is writing now
    first = folder / "t000.py"
    _wait_for(lambda: FIXED_LINE in first.read_text() or process.poll() is not None, "a write")
    assert process.poll() is None, "the run finished before it could be interrupted"
    return process


@pytest.mark.skipif(not LINUX, reason="reads process states and children from /proc")
@pytest.mark.parametrize(
    ("signum", "exit_code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["TERM", "INT"]
)
def test_a_signal_stops_the_writing_and_the_workers(
    tmp_path: Path, signum: int, exit_code: int
) -> None:
    process = _start_fixing(tmp_path)
    # Freeze the parent so the files written before the signal can be counted exactly; the
    # signal is then pending when it resumes.
    os.kill(process.pid, signal.SIGSTOP)
    _wait_for(lambda: _state(process.pid) == "T", "the parent stopped")
    workers = _children(process.pid)
    before = _fixed_files(tmp_path)
    os.kill(process.pid, signum)
    os.kill(process.pid, signal.SIGCONT)
    _, err = process.communicate(timeout=120)

    assert process.returncode == exit_code, err
    assert b"Traceback" not in err and b"interrupted" in err
    assert _fixed_files(tmp_path) == before, "a file was written after the signal"
    assert 0 < len(before) < FILES
    assert len(workers) == 2
    assert [pid for pid in workers if _state(pid) != "gone"] == []
    expected = fixed(BODY)
    assert {p.read_text() for p in tmp_path.glob("t*.py")} <= {BODY, expected}
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(not LINUX, reason="the workers follow their parent through PR_SET_PDEATHSIG")
def test_workers_end_when_the_parent_is_killed(tmp_path: Path) -> None:
    process = _start_fixing(tmp_path)
    os.kill(process.pid, signal.SIGSTOP)
    _wait_for(lambda: _state(process.pid) == "T", "the parent stopped")
    workers = _children(process.pid)
    before = _fixed_files(tmp_path)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=120)

    assert len(workers) == 2
    _wait_for(lambda: all(_state(pid) in ("gone", "Z") for pid in workers), "workers gone")
    assert _fixed_files(tmp_path) == before
