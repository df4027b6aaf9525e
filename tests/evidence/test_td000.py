"""TD000: Python compiles the whole file first, so one statement that does not parse stops the
script before its first line runs; NUL bytes and undecodable bytes are refused the same way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from torchdoctor.analysis import check

MARKER = "print('the first line ran')\n"


def run_file(tmp_path: Path, data: bytes) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "train.py"
    script.write_bytes(data)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (
            "def train(model, loader:\n    for x, y in loader:\n        pass\n",
            "'(' was never closed",
        ),
        ("img = img.cuda(async=True)\n", "invalid syntax"),
        ("for epoch in range(3)\n    pass\n", "expected ':'"),
    ],
)
def test_a_broken_statement_stops_the_file_before_anything_runs(
    tmp_path: Path, broken: str, message: str
) -> None:
    done = run_file(tmp_path, (MARKER + broken).encode())
    assert done.returncode == 1
    assert "the first line ran" not in done.stdout
    assert f"SyntaxError: {message}" in done.stderr
    # and TD000 says what Python says
    [finding] = [f for f in check(MARKER + broken) if f.code == "TD000"]
    assert finding.message == f"SyntaxError: {message}"


def test_null_bytes_stop_the_file(tmp_path: Path) -> None:
    done = run_file(tmp_path, MARKER.encode() + b"x = 1\x00\n")
    assert done.returncode == 1 and "the first line ran" not in done.stdout
    assert "SyntaxError: source code cannot contain null bytes" in done.stderr


def test_bytes_not_valid_in_the_encoding_stop_the_file(tmp_path: Path) -> None:
    done = run_file(tmp_path, MARKER.encode() + b"s = 'caf\xe9'\n")  # latin-1, no coding line
    assert done.returncode == 1 and "the first line ran" not in done.stdout
    assert "SyntaxError: Non-UTF-8 code starting with '\\xe9'" in done.stderr
