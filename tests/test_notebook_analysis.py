"""Notebooks as the analysis sees them: cells read from nbformat 4 JSON, IPython syntax replaced
line for line, cells joined into one program and findings mapped back, sources written back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from torchdoctor.analysis import Config, Edit, Span, check
from torchdoctor.analysis.fixes import apply_edits
from torchdoctor.analysis.magics import as_python
from torchdoctor.analysis.notebook import CodeCell, analyse_notebook, in_cell, join_cells
from torchdoctor.analysis.notebook_file import NotebookError, read_notebook, with_sources
from torchdoctor.analysis.notebook_prelude import probe_prelude


def notebook_text(*sources: object, indent: int | None = 1) -> str:
    cells = [
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": s}
        for s in sources
    ]
    return (
        json.dumps(
            {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=indent
        )
        + "\n"
    )


def test_line_magics_keep_the_line_count_and_every_other_line_as_it_was() -> None:
    source = "x = 1\n%timeit f(x)\nfor i in range(3):\n    !echo $i\nfiles = !ls\nx?\n"
    cell = as_python(source)
    assert cell.parses
    assert (
        cell.text.splitlines()[0] == "x = 1" and cell.text.splitlines()[2] == "for i in range(3):"
    )
    assert len(cell.text.splitlines()) == len(source.splitlines())
    assert cell.neutral_lines == {1, 3, 4, 5}
    assert cell.text.splitlines()[3] == "    pass"  # the loop body stays a body


def test_a_cell_magic_with_a_python_body_keeps_the_body_and_others_leave_the_cell_out() -> None:
    timed = as_python("%%time\nimport torch\n")
    assert timed.parses and timed.text == "\nimport torch\n" and timed.neutral_lines == {0}
    shell = as_python("%%bash\nfor f in *; do echo $f; done\n")
    assert shell.parses and shell.text == "\n\n" and shell.neutral_lines == {0, 1}


def test_a_cell_that_parses_is_left_exactly_as_it_is() -> None:
    source = 'text = """\n%not a magic inside a string\n"""\n'
    assert as_python(source).text == source


def test_cells_join_in_order_and_lines_map_back_to_their_cell() -> None:
    program = join_cells([CodeCell(2, "a = 1\nb = 2"), CodeCell(3, ""), CodeCell(5, "c = 3\n")])
    assert program.text == "a = 1\nb = 2\nc = 3\n"
    located = program.locate(2)
    assert located is not None and (located[0].number, located[1]) == (5, 0)


def test_findings_across_cells_map_to_the_cell_they_are_in() -> None:
    cells = [
        CodeCell(1, "import torch\nmodel = torch.nn.Linear(2, 1)\n"),
        CodeCell(2, "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"),
        CodeCell(
            3,
            "for x in range(3):\n    loss = model(torch.randn(4, 2)).sum()\n"
            "    loss.backward()\n    opt.step()\n",
        ),
    ]
    analysis = analyse_notebook(cells, Config(), "nb.ipynb")
    located = [in_cell(analysis.program, finding) for finding in analysis.findings]
    td101 = next(item for item in located if item and item[1].code == "TD101")
    number, finding = td101
    assert number == 3 and finding.span.start_line == 2
    assert finding.fix is not None and finding.fix.edits[0].span.start_line == 1


def test_a_broken_cell_reports_td000_at_its_own_line_and_the_rest_is_analysed() -> None:
    cells = [
        CodeCell(1, "import torch\n"),
        CodeCell(2, "x = (1,\n"),  # never closed: must not swallow the next cell
        CodeCell(3, "torch.solve(a, b)\n"),
    ]
    analysis = analyse_notebook(cells, Config(), "nb.ipynb")
    codes = {(in_cell(analysis.program, f) or (0, f))[0]: f.code for f in analysis.findings}
    assert codes[2] == "TD000"
    assert codes[3] == "TD707"


@pytest.mark.parametrize("indent", [1, 2, None])
def test_an_untouched_notebook_is_written_back_byte_for_byte(indent: int | None) -> None:
    text = notebook_text(["import torch\n", "x = 1"], "y = 2\n", [], indent=indent)
    notebook = read_notebook(text)
    assert with_sources(notebook, {}) == text
    same = {cell.number: cell.source for cell in notebook.cells}
    assert with_sources(notebook, same) == text


@pytest.mark.parametrize("indent", [1, 2, None])
def test_written_sources_take_the_form_and_indentation_of_the_old_ones(indent: int | None) -> None:
    text = notebook_text(["import torch\n", "x = 1"], "y = 2\n", [], indent=indent)
    notebook = read_notebook(text)
    new = with_sources(notebook, {1: "import torch\nx = 2", 2: "y = 3\n", 3: "z = 4\n"})
    cells = json.loads(new)["cells"]
    assert cells[0]["source"] == ["import torch\n", "x = 2"]
    assert cells[1]["source"] == "y = 3\n"  # a string stays a string
    assert cells[2]["source"] == ["z = 4\n"]
    # formatted as the file's own formatter would (the file is json.dumps with `indent`)
    expected = json.loads(text)
    for cell, source in zip(
        expected["cells"], (["import torch\n", "x = 2"], "y = 3\n", ["z = 4\n"]), strict=True
    ):
        cell["source"] = source
    assert new == json.dumps(expected, indent=indent) + "\n"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"cells": [', "not valid JSON"),
        ("[]", "not an object"),
        ('{"nbformat": 3, "worksheets": []}', "not an nbformat 4 notebook"),
        ('{"nbformat": 4, "cells": [{"cell_type": "code", "source": 7}]}', "cell 1"),
    ],
)
def test_what_is_not_a_notebook_says_why(text: str, reason: str) -> None:
    with pytest.raises(NotebookError, match=reason):
        read_notebook(text)


def test_the_prelude_keeps_definitions_and_constants_on_their_lines() -> None:
    program = "import torch\nN = 3\nfor i in range(N):\n    print(i)\nclass M:\n    pass\nM()\n"
    prelude = probe_prelude(program, "M")
    assert prelude is not None
    assert prelude.text == "import torch\nN = 3\n\n\nclass M:\n    pass\n\n"
    assert (prelude.kept, prelude.skipped) == (3, 1)
    assert probe_prelude(program, "Missing") is None


def test_an_insertion_after_a_last_cell_without_a_final_newline_starts_a_new_line() -> None:
    program = join_cells([CodeCell(1, "a = 1\nb = 2")])
    moved = program.edit_in_cell(Edit(Span(2, 0, 2, 0), "c = 3\n"))
    assert moved is not None
    number, edit = moved
    assert number == 1
    assert apply_edits("a = 1\nb = 2", [edit]) == "a = 1\nb = 2\nc = 3"


def test_a_truncated_or_absurd_notebook_is_refused_and_never_crashes() -> None:
    text = (Path(__file__).parent / "notebooks" / "training_across_cells.ipynb").read_text()
    for end in range(0, len(text), 53):
        try:
            notebook = read_notebook(text[:end])
        except NotebookError:
            continue
        assert with_sources(notebook, {}) == text[:end]
    with pytest.raises(NotebookError, match="nests too deeply"):
        read_notebook(
            '{"nbformat": 4, "cells": [], "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}"
        )


def test_loader_workers_at_the_top_of_a_notebook_are_not_td505() -> None:
    """The same code in a script is TD505; in a notebook a `__main__` guard changes nothing."""
    fixture = Path(__file__).parent / "fixtures" / "TD505" / "positive_main_without_guard.py"
    source = fixture.read_text(encoding="utf-8")
    script = check(source, "train.py", Config(select=("TD505",)))
    assert [finding.code for finding in script] == ["TD505"]
    analysis = analyse_notebook([CodeCell(1, source)], Config(select=("TD505",)), "nb.ipynb")
    assert not analysis.findings
