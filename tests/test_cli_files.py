"""Odd entries on disk: link loops, links to nothing, FIFOs, and names no output can carry raw."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BUGGY = """\
import torch

for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
"""
POSIX = os.name == "posix"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    # the time-out only guards the suite against a hang (opening a FIFO would block)
    return subprocess.run(
        [sys.executable, "-m", "torchdoctor", *args], capture_output=True, timeout=60, cwd=cwd
    )


@pytest.mark.skipif(not POSIX, reason="symbolic links need a POSIX file system")
def test_link_loops_and_broken_links_in_a_folder_are_reported_and_skipped(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(BUGGY)
    (tmp_path / "loop.py").symlink_to("loop.py")
    (tmp_path / "a.py").symlink_to("b.py")
    (tmp_path / "b.py").symlink_to("a.py")
    (tmp_path / "gone.py").symlink_to("deleted.py")

    done = run("check", "--no-color", str(tmp_path))

    err = done.stderr.decode()
    assert b"Traceback" not in done.stderr
    assert "loop.py: a symbolic link loop; skipped" in err
    assert "a.py: a symbolic link loop; skipped" in err
    assert "gone.py: a broken symbolic link (to deleted.py); skipped" in err
    assert b"train.py:5:5: TD101" in done.stdout  # the rest is still checked
    assert done.returncode == 2  # not 1: "findings" would hide that files were skipped


@pytest.mark.skipif(not POSIX, reason="symbolic links need a POSIX file system")
def test_a_link_loop_named_on_the_command_line_is_not_called_missing(tmp_path: Path) -> None:
    (tmp_path / "loop.py").symlink_to("loop.py")
    done = run("check", str(tmp_path / "loop.py"))
    assert done.returncode == 2
    assert b"a symbolic link loop" in done.stderr
    assert b"All checks passed" not in done.stdout and b"Traceback" not in done.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_named_explicitly_is_an_error_and_is_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    done = run("check", str(fifo))  # opening it for reading would block with no writer
    assert done.returncode == 2
    assert b"a FIFO, not a regular file" in done.stderr
    assert b"All checks passed" not in done.stdout


def test_a_device_named_explicitly_is_an_error() -> None:
    if not Path("/dev/null").exists():
        pytest.skip("no /dev/null here")
    done = run("check", "/dev/null")
    assert done.returncode == 2 and b"a character device, not a regular file" in done.stderr


@pytest.mark.skipif(not POSIX, reason="file names with a newline need a POSIX file system")
def test_a_newline_in_a_file_name_is_escaped_in_text_and_github_output(tmp_path: Path) -> None:
    (tmp_path / "two\nlines.py").write_text(BUGGY)

    text = run("check", "--no-color", "-q", ".", cwd=tmp_path).stdout.decode()
    assert text.splitlines()[0] == "two\\nlines.py:5:5: TD101 [*] " + _message()

    github = run("check", "--format", "github", ".", cwd=tmp_path).stdout.decode()
    assert len(github.splitlines()) == 1
    assert github.startswith("::warning file=two%0Alines.py,line=5,")


@pytest.mark.skipif(sys.platform != "linux", reason="needs a file system that takes any bytes")
@pytest.mark.parametrize("output_format", ["json", "sarif"])
def test_a_name_that_is_not_utf8_keeps_json_and_sarif_valid(
    tmp_path: Path, output_format: str
) -> None:
    (tmp_path / os.fsdecode(b"caf\xe9.py")).write_text(BUGGY)

    done = run("check", "--format", output_format, ".", cwd=tmp_path)

    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout.decode("utf-8"))  # strict: a raw \xe9 byte would fail
    if output_format == "json":
        assert document[0]["path"] == "caf\\xe9.py"
    else:
        location = document["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"] == "caf%E9.py"
    json.dumps(document).encode("utf-8")  # no lone surrogate anywhere


@pytest.mark.skipif(sys.platform != "linux", reason="needs a file system that takes any bytes")
def test_a_name_that_is_not_utf8_prints_in_text_output(tmp_path: Path) -> None:
    (tmp_path / os.fsdecode(b"caf\xe9.py")).write_text(BUGGY)
    done = run("check", "--no-color", ".", cwd=tmp_path)
    assert done.returncode == 1 and b"Traceback" not in done.stderr
    assert done.stdout.decode("utf-8").startswith("caf\\xe9.py:5:5: TD101")


def _message() -> str:
    from torchdoctor.analysis import check

    return check(BUGGY)[0].message


def test_terminal_controls_in_names_are_escaped_for_display() -> None:
    from torchdoctor.reporting.display import display_path

    assert display_path("red\x1b[31m.py") == "red\\x1b[31m.py"
    assert display_path("evil\u202eyp.py") == "evil\\u202eyp.py"
    assert display_path("a\\b\n.py") == "a\\\\b\\n.py"  # a backslash is escaped once any is
    assert display_path("src\\train.py") == "src\\train.py"  # and left alone otherwise
    assert display_path("ünï.py") == "ünï.py"
