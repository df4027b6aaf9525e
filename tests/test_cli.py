"""The `torchdoctor` command as a user and a CI job run it: outputs, exit codes, fixes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from torchdoctor.analysis import REGISTRY

BUGGY = """\
import torch

for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
"""
JSON_KEYS = {
    "code",
    "name",
    "severity",
    "message",
    "path",
    "line",
    "column",
    "end_line",
    "end_column",
    "fix",
}


def run(*args: str, stdin: str | bytes | None = None, cwd: Path | None = None):
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return subprocess.run(
        [sys.executable, "-m", "torchdoctor", *args],
        input=data,
        capture_output=True,
        timeout=60,
        cwd=cwd,
    )


@pytest.fixture
def buggy(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    return path


def test_text_output_points_at_the_line_with_a_caret(buggy: Path) -> None:
    done = run("check", "--no-color", str(buggy))
    out = done.stdout.decode()
    assert done.returncode == 1
    assert f"{buggy}:5:5: TD101 [*] gradients are never zeroed" in out
    assert "5 |     loss.backward()\n  |     ^^^^^^^^^^^^^^^" in out
    assert "Found 1 problem in 1 file (1 fixable with --fix)." in out


def test_json_output_matches_the_contract(buggy: Path) -> None:
    done = run("check", "--format", "json", str(buggy))
    rows = json.loads(done.stdout)
    assert done.returncode == 1 and len(rows) == 1
    row = rows[0]
    assert set(row) == JSON_KEYS
    assert (row["code"], row["name"], row["severity"]) == ("TD101", "missing-zero-grad", "warning")
    assert (row["line"], row["column"], row["end_line"], row["end_column"]) == (5, 5, 5, 20)
    edit = row["fix"]["edits"][0]
    assert set(edit) == {"line", "column", "end_line", "end_column", "content"}
    assert edit["content"] == "    optimizer.zero_grad()\n"
    assert (edit["line"], edit["column"]) == (4, 1)


def test_clean_file_exits_zero(tmp_path: Path) -> None:
    path = tmp_path / "ok.py"
    path.write_text("import torch\nx = torch.zeros(3)\n")
    done = run("check", str(path))
    assert done.returncode == 0
    assert b"All checks passed" in done.stdout


def test_sarif_is_valid_2_1_0_with_rules_and_regions(buggy: Path) -> None:
    sarif = json.loads(run("check", "--format", "sarif", str(buggy)).stdout)
    assert sarif["version"] == "2.1.0"
    run_ = sarif["runs"][0]
    assert run_["tool"]["driver"]["rules"][0]["id"] == "TD101"
    result = run_["results"][0]
    assert result["ruleId"] == "TD101" and result["level"] == "warning"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (5, 5)


def test_github_annotations(buggy: Path) -> None:
    out = run("check", "--format", "github", str(buggy)).stdout.decode()
    assert out.startswith(f"::warning file={buggy},line=5,col=5,endLine=5,endColumn=20,")
    assert "title=TD101 missing-zero-grad::gradients are never zeroed" in out


def test_fix_writes_the_file_and_reports_it(buggy: Path) -> None:
    done = run("check", "--fix", "--no-color", str(buggy))
    assert done.returncode == 0, done.stdout
    assert b"Fixed 1 problem." in done.stdout
    text = buggy.read_text()
    assert "for x, y in loader:\n    optimizer.zero_grad()\n    loss = criterion" in text
    assert run("check", str(buggy)).returncode == 0


def test_diff_shows_the_fix_and_writes_nothing(buggy: Path) -> None:
    done = run("check", "--diff", str(buggy))
    assert done.returncode == 1
    assert b"+    optimizer.zero_grad()" in done.stdout
    assert buggy.read_text() == BUGGY


def test_stdin_with_filename() -> None:
    done = run("check", "--format", "json", "--stdin-filename", "nb/cell.py", stdin=BUGGY)
    rows = json.loads(done.stdout)
    assert rows[0]["path"] == "nb/cell.py" and done.returncode == 1


def test_stdin_fix_prints_the_fixed_source() -> None:
    done = run("check", "--fix", "--stdin-filename", "x.py", stdin=BUGGY)
    assert b"optimizer.zero_grad()" in done.stdout


def test_select_and_ignore_from_the_command_line(buggy: Path) -> None:
    assert run("check", "--ignore", "TD101", str(buggy)).returncode == 0
    assert run("check", "--select", "TD102", str(buggy)).returncode == 0
    assert run("check", "--select", "TD1", str(buggy)).returncode == 1


def test_usage_errors_exit_2_with_a_message_and_no_traceback(tmp_path: Path) -> None:
    missing = run("check", str(tmp_path / "nope.py"))
    assert missing.returncode == 2 and b"no such file or folder" in missing.stderr
    bad_code = run("check", "--select", "XX9", str(tmp_path))
    assert bad_code.returncode == 2 and b"XX9" in bad_code.stderr
    assert b"Traceback" not in missing.stderr + bad_code.stderr
    assert run("explain", "TD999").returncode == 2


def test_garbage_truncated_and_non_utf8_files_do_not_crash(tmp_path: Path) -> None:
    (tmp_path / "latin1.py").write_bytes(b"# caf\xe9\nx = 1\n")
    (tmp_path / "garbage.py").write_bytes(bytes(range(256)) * 8)
    (tmp_path / "cut.py").write_text(BUGGY + "def f(:\n    for")
    (tmp_path / "cp1252.py").write_bytes(b"# -*- coding: cp1252 -*-\ns = '\x93hi\x94'\n")
    done = run("check", str(tmp_path))
    assert done.returncode == 1, done.stderr
    assert b"Traceback" not in done.stderr
    assert b"cut.py:5:5: TD101" in done.stdout


def test_fix_never_rewrites_a_file_it_could_not_decode_exactly(tmp_path: Path) -> None:
    path = tmp_path / "bad.py"
    original = BUGGY.encode() + b"# \xff\xfe broken bytes\n"
    path.write_bytes(original)
    done = run("check", "--fix", str(path))
    assert path.read_bytes() == original
    assert done.returncode == 2 and b"fixes were not written" in done.stderr


def test_folders_skip_virtualenvs_and_config_excludes(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.torchdoctor]\nexclude = ["generated/"]\n')
    for folder in (".venv/lib", "generated", "src"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "t.py").write_text(BUGGY)
    rows = json.loads(run("check", "--format", "json", ".", cwd=tmp_path).stdout)
    assert [Path(r["path"]).parts[0] for r in rows] == ["src"]


def test_explain_prints_the_page_in_both_languages() -> None:
    en = run("explain", "TD101").stdout.decode()
    zh = run("explain", "td101", "--lang", "zh-CN").stdout.decode()
    assert en.startswith("# TD101 missing-zero-grad")
    assert "梯度" in zh


def test_rules_lists_every_registered_rule() -> None:
    rows = json.loads(run("rules", "--format", "json").stdout)
    assert [r["code"] for r in rows] == [info.code for info in REGISTRY]
    assert {"code", "name", "severity", "fixable"} <= set(rows[0])


def test_many_files_are_checked_in_parallel_with_the_same_result(tmp_path: Path) -> None:
    for index in range(40):
        (tmp_path / f"t{index:02}.py").write_text(BUGGY)
    serial = json.loads(run("check", "--format", "json", "-j", "1", str(tmp_path)).stdout)
    parallel = json.loads(run("check", "--format", "json", "-j", "2", str(tmp_path)).stdout)
    assert len(serial) == 40 and serial == parallel


def test_the_analysis_never_imports_torch() -> None:
    code = (
        "import sys, torchdoctor.cli, torchdoctor.analysis as a;"
        "a.check(open('examples/train_mnist.py').read());"
        "print('torch' in sys.modules)"
    )
    root = Path(__file__).parent.parent
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert done.stdout.strip() == "False", done.stderr
