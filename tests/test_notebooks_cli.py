"""`torchdoctor check` on Jupyter notebooks: code cells analysed together in cell order, findings
named by cell, magics understood, `--fix` written into the edited cells only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from torchdoctor.cli import main

NOTEBOOKS = Path(__file__).parent / "notebooks"
TRAINING = NOTEBOOKS / "training_across_cells.ipynb"


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    copy = tmp_path / "training.ipynb"
    shutil.copyfile(TRAINING, copy)
    return copy


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["check", "--no-color", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_loop_in_one_cell_is_understood_with_the_optimizer_of_another(
    notebook: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = check(capsys, str(notebook))
    assert code == 1
    # cell 5 (the markdown cell is cell 1), line 5 of that cell: `loss.backward()`
    assert f"{notebook}:cell 5:5:5: TD101 [*] gradients are never zeroed" in out
    assert "5 |     loss.backward()\n  |     ^^^^^^^^^^^^^^^" in out


def test_magics_and_shell_escapes_are_not_syntax_errors_but_python_2_is(
    notebook: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = check(capsys, "--format", "json", str(notebook))
    rows = json.loads(out)
    syntax = [(row["cell"], row["line"], row["column"]) for row in rows if row["code"] == "TD000"]
    # `!pip`, `%matplotlib`, `model?`, `%%time`, `files = !ls` and the %%bash cell all pass;
    # the `print "..."` cell is the one that Python refuses
    assert syntax == [(7, 1, 1)]
    # and the cell after the broken one is still analysed with the rest
    assert any(row["code"] == "TD101" for row in rows)


def test_json_names_the_cell_and_counts_lines_within_it(
    notebook: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = check(capsys, "--format", "json", str(notebook))
    td101 = next(row for row in json.loads(out) if row["code"] == "TD101")
    assert (td101["cell"], td101["line"], td101["column"]) == (5, 5, 5)
    # the fix inserts at the top of the loop body, in the same cell's lines
    assert td101["fix"]["edits"][0]["line"] == 3
    assert td101["fix"]["edits"][0]["content"] == "    optimizer.zero_grad()\n"


def test_noqa_silences_one_line_of_a_cell_only(
    notebook: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = check(capsys, "--format", "json", str(notebook))
    unsafe_loads = [(row["cell"], row["line"]) for row in json.loads(out) if row["code"] == "TD702"]
    assert unsafe_loads == [(6, 3)]  # line 2 carries a noqa comment for TD702, line 3 does not


def test_sarif_and_github_outputs_carry_the_cell(
    notebook: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = check(capsys, "--format", "sarif", str(notebook))
    results = json.loads(out)["runs"][0]["results"]
    td101 = next(result for result in results if result["ruleId"] == "TD101")
    assert td101["properties"] == {"cell": 5}
    assert td101["locations"][0]["physicalLocation"]["region"]["startLine"] == 5
    _, out, _ = check(capsys, "--format", "github", str(notebook))
    assert "line=5,col=5," in out and "::cell 5: gradients are never zeroed" in out


def test_fix_changes_only_the_edited_cell_source(
    notebook: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before_text = notebook.read_text(encoding="utf-8")
    check(capsys, "--fix", str(notebook))
    after_text = notebook.read_text(encoding="utf-8")
    before, after = json.loads(before_text), json.loads(after_text)
    changed = [
        number
        for number, (old, new) in enumerate(zip(before["cells"], after["cells"], strict=True), 1)
        if old != new
    ]
    # the training loop (TD101); the torch.load fix (TD702) changes behaviour, so is not safe
    assert changed == [5]
    for old, new in zip(before["cells"], after["cells"], strict=True):
        assert {k: v for k, v in old.items() if k != "source"} == {
            k: v for k, v in new.items() if k != "source"
        }
    assert list(after) == list(before) and after["metadata"] == before["metadata"]
    assert after["cells"][4]["source"][:3] == [
        "%%time\n",
        "for step in range(100):\n",
        "    optimizer.zero_grad()\n",
    ]
    # the file's own spelling stays: indentation, the \u2014 escape and 1.30e-3 in the outputs
    assert "\\u2014" in after_text and "1.30e-3" in after_text and after_text.endswith("}\n")
    assert after_text.startswith('{\n "cells": [\n  {\n   "cell_type": "markdown"')


def test_a_second_fix_changes_nothing(notebook: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check(capsys, "--fix", str(notebook))
    once = notebook.read_bytes()
    check(capsys, "--fix", str(notebook))
    assert notebook.read_bytes() == once


def test_a_notebook_that_is_not_json_is_an_error_and_is_never_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.ipynb"
    shutil.copyfile(NOTEBOOKS / "not_json.ipynb", broken)
    data = broken.read_bytes()
    code, _, err = check(capsys, "--fix", str(broken))
    assert code == 2
    assert "broken.ipynb: cannot read the notebook: not valid JSON" in err
    assert broken.read_bytes() == data


def test_folders_are_searched_for_notebooks_but_not_jupyter_checkpoints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copyfile(TRAINING, tmp_path / "train.ipynb")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    shutil.copyfile(TRAINING, tmp_path / ".ipynb_checkpoints" / "train-checkpoint.ipynb")
    _, out, _ = check(capsys, "--format", "json", str(tmp_path))
    paths = {Path(row["path"]).name for row in json.loads(out)}
    assert paths == {"train.ipynb"}


def test_diff_shows_the_notebook_change_and_writes_nothing(
    notebook: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = notebook.read_bytes()
    code, out, _ = check(capsys, "--diff", str(notebook))
    assert code == 1
    assert '+    "    optimizer.zero_grad()\\n",' in out
    assert notebook.read_bytes() == data


def test_stdin_fix_of_a_broken_notebook_prints_nothing(
    monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"cells": [')))
    code = main(["check", "--no-color", "--stdin-filename", "nb.ipynb", "--fix"])
    captured = capsysbinary.readouterr()
    assert code == 2
    assert captured.out == b""
    assert b"nb.ipynb: cannot read the notebook: not valid JSON" in captured.err
