"""Incremental analysis gives exactly what a fresh analysis of the final text gives: the same
tree (positions included), the same syntax problems and the same findings (codes, ranges,
messages, fixes), after any sequence of edits, whether each edit could reuse the previous
version's statements or not."""

from __future__ import annotations

import ast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torchdoctor.analysis import Config, Document, analyse
from torchdoctor.analysis.incremental import IncrementalAnalyser

from bench.corpus import make_file
from bench.fuzz import TOKENS

from .conftest import ROOT, fixture_files

ALL = Config(select=("ALL",))
PATH = "edited.py"
SEEDS = [
    *(path.read_text(encoding="utf-8") for path in fixture_files()),
    *(path.read_text(encoding="utf-8") for path in sorted((ROOT / "examples").glob("*.py"))),
    make_file(300, seed=7),
]
# what a typist adds: tokens that open and close brackets, strings, blocks and continuations
TYPED = st.sampled_from(
    [*TOKENS, "#", "x", " ", "\t", '"""', "'", "\\", "else:", "@dec", "    ", ".view(", "\r"]
) | st.text(max_size=6)


def _edit(data: st.DataObject, text: str) -> str:
    lines = text.split("\n")
    line = data.draw(st.integers(0, len(lines) - 1))
    content = lines[line]
    kind = data.draw(st.sampled_from(["type", "delete", "replace-line", "newline", "join"]))
    if kind == "type":
        column = data.draw(st.integers(0, len(content)))
        lines[line] = content[:column] + data.draw(TYPED) + content[column:]
    elif kind == "delete" and content:
        start = data.draw(st.integers(0, len(content) - 1))
        end = data.draw(st.integers(start + 1, len(content)))
        lines[line] = content[:start] + content[end:]
    elif kind == "replace-line":
        lines[line] = data.draw(st.sampled_from(lines) | TYPED)
    elif kind == "newline":
        column = data.draw(st.integers(0, len(content)))
        lines[line : line + 1] = [content[:column], content[column:]]
    elif kind == "join" and line + 1 < len(lines):
        lines[line : line + 2] = [content + lines[line + 1]]
    return "\n".join(lines)


def _dump(document: Document) -> str:
    return ast.dump(document.tree, include_attributes=True)


def _assert_same_as_fresh(analyser: IncrementalAnalyser, text: str) -> None:
    document, findings = analyser.analyse(text, ALL)
    fresh = Document.parse(text, PATH)
    assert _dump(document) == _dump(fresh)
    assert document.syntax_problems == fresh.syntax_problems
    assert document.parsed_whole == fresh.parsed_whole
    assert document.text == fresh.text
    assert document.index == fresh.index
    assert findings == analyse(fresh, ALL)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_edit_sequences_give_the_findings_of_a_fresh_analysis(data: st.DataObject) -> None:
    text = data.draw(st.sampled_from(SEEDS))
    analyser = IncrementalAnalyser(PATH)
    _assert_same_as_fresh(analyser, text)
    for _ in range(data.draw(st.integers(1, 8))):
        edited = _edit(data, text)
        _assert_same_as_fresh(analyser, edited)
        # an undo: back to the text before the edit, or carry on from the edited one
        if data.draw(st.booleans()):
            _assert_same_as_fresh(analyser, text)
        else:
            text = edited


def test_a_keystroke_reuses_the_other_statements() -> None:
    text = make_file(300, seed=7)
    analyser = IncrementalAnalyser(PATH)
    before = analyser.parse(text)
    lines = text.split("\n")
    middle = len(lines) // 2
    while not lines[middle].strip():
        middle += 1
    lines[middle] += "  # typed"
    after = analyser.parse("\n".join(lines))
    assert after.tree.body[0] is before.tree.body[0]
    assert after.tree.body[-1] is before.tree.body[-1]
    assert _dump(after) == _dump(Document.parse("\n".join(lines), PATH))


def test_continuations_across_the_edited_region_fall_back_to_a_full_parse() -> None:
    analyser = IncrementalAnalyser(PATH)
    text = "x = 1 + \\\n    2\ny = 3\n\nz = 4\n"
    analyser.parse(text)
    for edited in [
        "x = 1 + \\\n    2\ny = 3 \\\n\nz = 4\n",  # the edited line continues into the next
        "x = 1 + \\\n    5\ny = 3\n\nz = 4\n",  # an edit inside a continued statement
        "x = 1 + \\\n    5\nif y:\n    pass\nelse: z = 4\n",
        "x = 1 + \\\n    5\nif y:\n    pass\n\n@dec\n",
    ]:
        _assert_same_as_fresh(analyser, edited)
