"""A file that does not parse is a TD000 finding in every output format, and never passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BUGGY_LOOP = """\
import torch

for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
"""


def run(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "torchdoctor", *args], capture_output=True, timeout=60
    )


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.py"
    path.write_text("def f(:\n    return 1\n")
    return path


def test_text_output_reports_the_error_where_python_does(broken: Path) -> None:
    done = run("check", "--no-color", str(broken))
    out = done.stdout.decode()
    assert done.returncode == 1
    assert f"{broken}:1:7: TD000 SyntaxError: invalid syntax" in out
    assert "1 | def f(:\n  |       ^" in out
    assert "All checks passed" not in out
    assert "Found 1 problem in 1 file." in out
    assert "TD000" not in done.stderr.decode()  # shown once, as a finding


def test_json_output_carries_it_with_the_contract_keys(broken: Path) -> None:
    done = run("check", "--format", "json", str(broken))
    rows = json.loads(done.stdout)
    assert done.returncode == 1
    assert rows == [
        {
            "code": "TD000",
            "name": "syntax-error",
            "severity": "error",
            "message": "SyntaxError: invalid syntax",
            "path": str(broken),
            "line": 1,
            "column": 7,
            "end_line": 1,
            "end_column": 8,
            "fix": None,
        }
    ]


def test_sarif_output_carries_it_with_its_rule(broken: Path) -> None:
    sarif = json.loads(run("check", "--format", "sarif", str(broken)).stdout)
    run_ = sarif["runs"][0]
    assert [rule["id"] for rule in run_["tool"]["driver"]["rules"]] == ["TD000"]
    result = run_["results"][0]
    assert (result["ruleId"], result["level"]) == ("TD000", "error")
    region = result["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (1, 7)


def test_github_output_annotates_it_as_an_error(broken: Path) -> None:
    out = run("check", "--format", "github", str(broken)).stdout.decode()
    assert out == (
        f"::error file={broken},line=1,col=7,endLine=1,endColumn=8,"
        "title=TD000 syntax-error::SyntaxError: invalid syntax\n"
    )


def test_it_is_on_whatever_the_selection(broken: Path) -> None:
    for selection in (["--select", "TD1"], ["--ignore", "TD000"], ["--ignore", "ALL"]):
        done = run("check", "--format", "json", *selection, str(broken))
        assert [row["code"] for row in json.loads(done.stdout)] == ["TD000"], selection
        assert done.returncode == 1


def test_the_rest_of_a_broken_file_is_still_checked(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(BUGGY_LOOP + "\ndef evaluate(model, loader:\n    pass\n")
    rows = json.loads(run("check", "--format", "json", str(path)).stdout)
    assert [(row["code"], row["line"]) for row in rows] == [("TD101", 5), ("TD000", 8)]


def test_bytes_python_cannot_decode_are_a_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.py"
    path.write_bytes(b"x = 1\ns = 'caf\xe9'\n")  # no coding line: Python reads UTF-8
    rows = json.loads(run("check", "--format", "json", str(path)).stdout)
    assert [(row["code"], row["line"], row["column"]) for row in rows] == [("TD000", 2, 9)]
    assert "not valid utf-8" in rows[0]["message"]


def test_null_bytes_are_a_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "nul.py"
    path.write_bytes(b"x = 1\ny = 2\x00\n")
    rows = json.loads(run("check", "--format", "json", str(path)).stdout)
    assert [(row["code"], row["line"], row["column"]) for row in rows] == [("TD000", 2, 6)]


def test_a_file_python_compiles_has_no_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "fine.py"
    source = "# -*- coding: latin-1 -*-\ns = 'caf\xe9'\nmatch s:\n    case _:\n        pass\n"
    path.write_bytes(source.encode("latin-1"))
    compile(path.read_bytes(), str(path), "exec")
    done = run("check", str(path))
    assert done.returncode == 0, done.stdout
