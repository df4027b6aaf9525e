"""Half-typed code: the parts that parse still get findings, and no input makes analysis raise."""

from __future__ import annotations

import ast

import pytest
from torchdoctor.analysis import Document, check
from torchdoctor.analysis.lines import LineIndex

TRAINING = """\
import torch
from torch import nn

model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for x, y in loader:
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
"""


def _codes_at(text: str) -> set[tuple[int, str]]:
    return {(f.span.start_line + 1, f.code) for f in check(text)}


def test_a_file_cut_off_mid_statement_keeps_the_findings_of_its_complete_parts() -> None:
    cut = (
        TRAINING + "\ndef evaluate(model, loader):\n    for x, y in loader:\n        out = model(x,"
    )
    assert (9, "TD101") in _codes_at(cut)


def test_a_broken_line_inside_the_loop_does_not_hide_the_loop() -> None:
    broken = TRAINING.replace("    loss.backward()\n", "    loss.backward()\n    print(loss.\n")
    assert (9, "TD101") in _codes_at(broken)


def test_a_loop_header_without_body_yet() -> None:
    text = TRAINING + "for epoch in range(3):\n"
    assert (9, "TD101") in _codes_at(text)


def test_an_unclosed_call_in_the_middle_keeps_the_statements_after_it() -> None:
    text = TRAINING.replace(
        "    loss = nn.functional.mse_loss(model(x), y)\n",
        "    loss = nn.functional.mse_loss(model(x), y)\n    log(loss,\n",
    )
    assert (10, "TD101") in _codes_at(text)


def test_syntax_problems_are_reported_with_their_position() -> None:
    doc = Document.parse("x = (\n")
    assert not doc.fully_parsed
    assert doc.syntax_problems[0].line == 0


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\0\0\0",
        "x = 1\0\nfor",
        "((((((((((",
        "def f(:\n  return",
        "class A(nn.Module):\n    def __init__(self",
        '"""unterminated',
        "\t\tx = 1\n  y = 2\n",
        "\ufeffimport torch\n",
        "x = '\ud800'\n",
        "(" * 5000,
        "[" * 300 + "]" * 300,
        "a" * 200_000,
        "λ = 1\n変数 = torch.zeros(3)\n🙂",
        "if x:\r\n  pass\r  y = 1\n",
    ],
)
def test_no_text_makes_analysis_raise(text: str) -> None:
    findings = check(text)
    index = LineIndex.of(text)
    for finding in findings:
        assert finding.span.start_line < index.line_count


def test_line_index_counts_utf16_like_lsp() -> None:
    index = LineIndex.of("s = '😀'; x.view(1)\r\nnext")
    column = index.lines[0].index("x")
    assert index.char_to_utf16(0, column) == column + 1  # the emoji takes two UTF-16 units
    assert index.utf16_to_char(0, column + 1) == column
    assert index.lines[1] == "next"


def test_byte_columns_from_ast_become_character_columns() -> None:
    text = "é = 1; loss.backward()\n"
    doc = Document.parse(text)
    call = next(n for n in ast.walk(doc.tree) if isinstance(n, ast.Call))
    assert doc.span_of(call).start_col == text.index("loss")
