"""The pure half of the editor's shapes: labels, where a hint goes, stale lines, the hover's
name under the cursor, and the setting. Rows are built the way the probe's JSON reads."""

from __future__ import annotations

import ast

from torchdoctor.lsp.local_shapes import (
    SUBMODULES,
    RowsForFile,
    hint_label,
    local_hover,
    shape_hints,
)
from torchdoctor.lsp.settings import parse_settings
from torchdoctor.probe.shape_schema import LineShapes, LocalShape, LocalValue, TensorFacts

SOURCE = '''class Net:
    def forward(self, x):
        pair = self.split(
            x,
        )
        état = x * 2
        for _ in range(3):
            x = self.block(x)
        return x
'''
LINES = SOURCE.splitlines()
TREE = ast.parse(SOURCE)


def facts(*shape: int, dtype: str = "float32", grad: bool = True) -> TensorFacts:
    size = 1
    for n in shape:
        size *= n
    return TensorFacts(list(shape), dtype, "cpu", grad, size * 4)


def tensor(*shape: int) -> LocalValue:
    return LocalValue("tensor", [facts(*shape)], 1, None)


def row(line: int, hits: int = 1, **names: tuple[LocalValue, LocalValue]) -> LineShapes:
    locals_ = [
        LocalShape(name, first, last, first != last, hits) for name, (first, last) in names.items()
    ]
    return LineShapes("/p/net.py", line, "forward", LINES[line - 1].strip(), hits, locals_)


def test_labels_name_each_local_group_shapes_and_show_loops_first_to_last() -> None:
    same = row(6, **{"a": (tensor(2, 3), tensor(2, 3)), "b": (tensor(2, 3), tensor(2, 3))})
    assert hint_label(same) == "→ a, b (2, 3)"
    loop = row(8, hits=3, x=(tensor(2, 8), tensor(2, 32)))
    assert hint_label(loop) == "→ x (2, 8) … (2, 32) ×3"
    pair = LocalValue("tuple", [facts(2, 3), facts(2,)], 2, None)
    mapping = LocalValue("dict", [facts(4,)], 1, ["logits"])
    mixed = row(6, p=(pair, pair), m=(mapping, mapping))
    assert hint_label(mixed) == "→ p ((2, 3), (2,)); m {logits: (4,)}"
    returned = row(9, **{"return": (tensor(2, 32), tensor(2, 32))})
    assert hint_label(returned) == "→ (2, 32)"


def test_a_multi_line_statement_gets_its_hint_at_its_last_line() -> None:
    source = RowsForFile((row(3, pair=(tensor(1, 2), tensor(1, 2))),))
    (hint,) = shape_hints(source, LINES, TREE)
    assert hint.line == 4  # the line of `)`, 0-based
    assert not hint.stale


def test_after_an_edit_unchanged_lines_keep_stale_hints_and_changed_lines_lose_them() -> None:
    rows = (row(6, **{"état": (tensor(4,), tensor(4,))}), row(8, x=(tensor(2,), tensor(2,))))
    edited = ["# a new first line", *LINES]
    edited[8] = "            x = self.other(x)"  # was line 8, now 9: rewritten
    hints = shape_hints(RowsForFile(rows), edited, ast.parse("\n".join(edited)))
    assert [(h.line, h.stale) for h in hints] == [(6, True)]  # moved down by one, stale


def test_submodule_scope_keeps_only_lines_calling_self_modules() -> None:
    rows = (
        row(6, **{"état": (tensor(4,), tensor(4,))}),
        row(8, x=(tensor(2,), tensor(2,))),
    )
    hints = shape_hints(RowsForFile(rows), LINES, TREE, SUBMODULES)
    assert [h.line for h in hints] == [7]


def test_hover_finds_the_binding_above_the_cursor_even_after_non_ascii_text() -> None:
    rows = (
        row(2, x=(tensor(2, 4), tensor(2, 4))),
        row(6, **{"état": (tensor(2, 4), tensor(2, 4))}),
        row(8, hits=3, x=(tensor(2, 8), tensor(2, 32))),
    )
    source = RowsForFile(rows)
    line = 5  # `état = x * 2`: the cursor on `x`, after a non-ASCII name
    column = LINES[line].index("x *")
    text = local_hover(source, LINES, TREE, line, column)
    assert text is not None and "(2, 4) · float32 · cpu · requires_grad · 32 B" in text
    assert "bound on line 2" in text
    # `return x`, below the loop: the loop line's first and last runs
    text = local_hover(source, LINES, TREE, 8, LINES[8].index("x"))
    assert text is not None and "first of 3 runs" in text and "(2, 32)" in text
    assert local_hover(source, LINES, TREE, 0, 0) is None  # not in a function


def test_the_setting_falls_back_to_every_line_and_says_why() -> None:
    assert parse_settings({"shapeHints": "submodules"}).settings.shape_hints == "submodules"
    parsed = parse_settings({"shapeHints": "all"})
    assert parsed.settings.shape_hints == "everyLine"
    assert any("shapeHints" in problem for problem in parsed.problems)
