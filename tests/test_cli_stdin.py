"""`check --stdin-filename NAME --fix` as an editor's formatter runs it: the fixed source comes
back on stdout in the bytes it came in, or nothing comes back."""

from __future__ import annotations

import subprocess
import sys

BUGGY = """\
import torch

for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
"""
FIXED_LINE = "    optimizer.zero_grad()\n"


def fix_stdin(data: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "torchdoctor", "check", "--fix", "--stdin-filename", "cell.py"],
        input=data,
        capture_output=True,
        timeout=60,
    )


def test_a_declared_latin1_source_comes_back_in_latin1() -> None:
    source = "# -*- coding: latin-1 -*-\n# entraîné sur CPU\n" + BUGGY
    done = fix_stdin(source.encode("latin-1"))
    assert done.returncode == 0, done.stderr
    expected = source.replace("    loss = crit", FIXED_LINE + "    loss = crit", 1)
    assert done.stdout == expected.encode("latin-1")


def test_a_bom_is_kept() -> None:
    done = fix_stdin(b"\xef\xbb\xbf" + BUGGY.encode())
    assert done.stdout.startswith(b"\xef\xbb\xbfimport torch\n")
    assert FIXED_LINE.encode() in done.stdout


def test_windows_line_endings_are_kept() -> None:
    done = fix_stdin(BUGGY.replace("\n", "\r\n").encode())
    assert b"\r\n    optimizer.zero_grad()\r\n" in done.stdout
    assert b"\n" not in done.stdout.replace(b"\r\n", b"")


def test_a_source_with_nothing_to_fix_comes_back_byte_for_byte() -> None:
    data = b"# -*- coding: latin-1 -*-\r\nx = '\xe9'  \r\n"
    done = fix_stdin(data)
    assert done.returncode == 0 and done.stdout == data


def test_undecodable_input_prints_nothing_and_says_why() -> None:
    done = fix_stdin(BUGGY.encode() + b"# \xff\xfe not utf-8\n")
    assert done.stdout == b""
    assert done.returncode == 2
    assert b"stdin is not valid utf-8 (line 7, column 3); nothing was printed" in done.stderr
    assert b"Traceback" not in done.stderr
