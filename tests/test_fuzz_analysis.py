"""Fuzzing the analysis with mutated real code: it never raises, stays within a time bound per
file, and every range it reports lies inside the document. Bounded so the suite stays fast;
`python -m bench.fuzz` runs the same strategies for longer."""

from __future__ import annotations

import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchdoctor.analysis import Config, Document, analyse
from torchdoctor.analysis.fixes import apply_fixes
from torchdoctor.analysis.lines import LineIndex
from torchdoctor.reporting.source import decode_source

from .conftest import ROOT, fixture_files

SEEDS = [path.read_text(encoding="utf-8") for path in fixture_files()] + [
    path.read_text(encoding="utf-8") for path in sorted((ROOT / "examples").glob("*.py"))
]
ALL = Config(select=("ALL",))
TOKENS = ["(", ")", "[", "]", "{", "}", ":", "\\", "'", '"', '"""', "#", "\t", "\0", "@",
          "lambda", "for", "while", "def", "class", "with", "yield", ".backward()", ".step()",
          "zero_grad()", "变量", "🙂", "λ", "\r", "\r\n", "\x0c", "\u2028", "\ufeff", " " * 9]
SECONDS_PER_FILE = 10.0  # a hang detector, not a benchmark: real files take milliseconds


def mutate(data: st.DataObject, text: str) -> str:
    lines = text.split("\n")
    kind = data.draw(st.sampled_from(
        ["truncate", "delete", "duplicate", "shuffle", "insert", "brackets", "endings", "long"]
    ))
    if kind == "truncate":
        return text[: data.draw(st.integers(0, len(text)))]
    if kind == "delete" and lines:
        start = data.draw(st.integers(0, len(lines) - 1))
        return "\n".join(lines[:start] + lines[start + data.draw(st.integers(1, 5)) :])
    if kind == "duplicate" and lines:
        start = data.draw(st.integers(0, len(lines) - 1))
        return "\n".join(lines[: start + 1] + lines[start:])
    if kind == "shuffle":
        return "\n".join(data.draw(st.permutations(lines)))
    if kind == "insert":
        position = data.draw(st.integers(0, len(text)))
        token = data.draw(st.sampled_from(TOKENS) | st.text(max_size=8))
        return text[:position] + token + text[position:]
    if kind == "brackets":
        depth = data.draw(st.integers(1, 3000))
        return text + "\nx = " + "(" * depth + "1" + ")" * data.draw(st.integers(0, depth))
    if kind == "endings":
        ending = data.draw(st.sampled_from(["\r\n", "\r", "\n", "\n\r"]))
        return ending.join(lines).replace("    ", data.draw(st.sampled_from(["\t", "    "])))
    return text + "\n" + "y = " + " + ".join(["loss"] * data.draw(st.integers(1, 4000)))


def assert_sound(text: str) -> None:
    start = time.perf_counter()
    doc = Document.parse(text)
    findings = analyse(doc, ALL)
    assert time.perf_counter() - start < SECONDS_PER_FILE
    index = LineIndex.of(text)
    for finding in findings:
        span = finding.span
        assert (span.start_line, span.start_col) <= (span.end_line, span.end_col)
        assert span.end_line < index.line_count
        assert span.end_col <= len(index.line(span.end_line))
        if finding.fix is not None:
            for edit in finding.fix.edits:
                assert edit.span.end_line <= index.line_count
    apply_fixes(text, findings, unsafe=True)  # never raises, whatever the fixes are


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_mutated_real_code_never_breaks_the_analysis(data: st.DataObject) -> None:
    text = data.draw(st.sampled_from(SEEDS))
    for _ in range(data.draw(st.integers(1, 3))):
        text = mutate(data, text)
    assert_sound(text)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=400))
def test_arbitrary_text_never_breaks_the_analysis(text: str) -> None:
    assert_sound(text)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.binary(max_size=400))
def test_arbitrary_bytes_decode_and_analyse(data: bytes) -> None:
    assert_sound(decode_source(data).text)


def test_pathological_shapes() -> None:
    for text in [
        "(" * 10_000,
        "x = " + "-" * 50_000 + "1",
        "if x:\n" + "".join(" " * i + "if x:\n" for i in range(1, 150)),
        "a = [" + "1, " * 100_000 + "]",
        "\n" * 100_000,
        "x" * 1_000_000,
        "def f():\n" + "    loss.backward()\n" * 5_000,
    ]:
        assert_sound(text)
