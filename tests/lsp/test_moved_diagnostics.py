"""An Enter keystroke moves every finding below it by a line: the language server moves their
diagnostics (ranges and the fixes' edits) instead of converting them again. What it sends must be
what a fresh conversion of the new version's findings gives, field for field and in UTF-16
columns, after any sequence of line breaks added and removed."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from torchdoctor.analysis.config import Config
from torchdoctor.analysis.incremental import IncrementalAnalyser
from torchdoctor.lsp.diagnostics import (
    AnalysisResult,
    DiagnosticCache,
    _unstructure,
    analyse_version,
    to_diagnostic,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# findings with fixes in several top-level blocks, one of them after non-ASCII text on its line
# (its columns differ in UTF-16 code units and code points)
TEXT = (
    (EXAMPLES / "train_mnist.py").read_text()
    + '\n\nlabel = "λ→"; y = torch.randn(2, 3).transpose(0, 1).view(-1)\n'
    + "\n\ndef evaluate(model, loader):\n    model.eval()\n    for x, y in loader:\n"
    + "        out = model(x)\n"
)


def _analyse(
    version: int, text: str, analyser: IncrementalAnalyser, cache: DiagnosticCache
) -> AnalysisResult:
    return analyse_version(
        uri="file:///work/train.py",
        version=version,
        generation=0,
        text=text,
        path="/work/train.py",
        config=Config(select=("ALL",)),
        encoding="utf-16",
        locale="en",
        analyser=analyser,
        converted=cache,
    )


def _assert_as_fresh(result: AnalysisResult) -> None:
    mapper = result.mapper
    fresh = [to_diagnostic(finding, mapper, "en") for finding in result.findings]
    assert result.diagnostics == fresh
    assert result.diagnostics_json is not None
    sent = [json.loads(text) for text in result.diagnostics_json]
    assert sent == [_unstructure(diagnostic) for diagnostic in fresh]


def test_an_enter_above_findings_moves_their_diagnostics_as_a_fresh_conversion_would() -> None:
    analyser, cache = IncrementalAnalyser("/work/train.py"), DiagnosticCache()
    _assert_as_fresh(_analyse(1, TEXT, analyser, cache))
    lines = TEXT.split("\n")
    # Enter at the end of the first line of the first function: the blocks below it move
    at = next(i for i, line in enumerate(lines) if line.startswith("def ")) + 1
    entered = "\n".join([*lines[:at], "", *lines[at:]])
    result = _analyse(2, entered, analyser, cache)
    _assert_as_fresh(result)
    with_fixes = [f for f in result.findings if f.fix is not None and f.span.start_line > at]
    assert with_fixes, "the text must have findings with fixes below the new line"
    assert all(id(finding) in analyser.moved_from for finding in with_fixes)
    _assert_as_fresh(_analyse(3, TEXT, analyser, cache))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 200)), min_size=1, max_size=6))
def test_line_breaks_added_and_removed_anywhere_give_the_diagnostics_of_a_fresh_conversion(
    edits: list[tuple[bool, int]],
) -> None:
    analyser, cache = IncrementalAnalyser("/work/train.py"), DiagnosticCache()
    lines = TEXT.split("\n")
    _analyse(1, TEXT, analyser, cache)
    for version, (add, at) in enumerate(edits, start=2):
        place = at % len(lines)
        if add:
            lines.insert(place, "")
        elif not lines[place].strip():
            del lines[place]  # only blank lines go: the code stays as it was
        _assert_as_fresh(_analyse(version, "\n".join(lines), analyser, cache))
