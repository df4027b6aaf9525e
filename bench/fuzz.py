"""Fuzzing the analysis: mutations of real code (fixtures and examples) and arbitrary text.

The test suite runs these strategies for a bounded number of examples; `python -m bench.fuzz
--examples N` runs them for longer and prints how many inputs were tried and what failed.
"""

from __future__ import annotations

import argparse
import time
import traceback
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torchdoctor.analysis import Config, Document, analyse
from torchdoctor.analysis.fixes import apply_fixes
from torchdoctor.analysis.lines import LineIndex

ROOT = Path(__file__).parent.parent
SEEDS = [
    path.read_text(encoding="utf-8") for path in sorted(ROOT.glob("tests/fixtures/TD*/*.py"))
] + [path.read_text(encoding="utf-8") for path in sorted((ROOT / "examples").glob("*.py"))]
ALL = Config(select=("ALL",))
TOKENS = [
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ":",
    "\\",
    "'",
    '"',
    '"""',
    "#",
    "\t",
    "\0",
    "@",
    "lambda",
    "for",
    "while",
    "def",
    "class",
    "with",
    "yield",
    ".backward()",
    ".step()",
    "zero_grad()",
    "变量",
    "🙂",
    "λ",
    "\r",
    "\r\n",
    "\x0c",
    "\u2028",
    "\ufeff",
    " " * 9,
]
SECONDS_PER_FILE = 10.0  # a hang detector, not a benchmark: real files take milliseconds


def mutate(data: st.DataObject, text: str) -> str:
    lines = text.split("\n")
    kind = data.draw(
        st.sampled_from(
            ["truncate", "delete", "duplicate", "shuffle", "insert", "brackets", "endings", "long"]
        )
    )
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


def run(examples: int) -> tuple[int, list[str]]:
    tried = 0
    failures: list[str] = []

    @settings(
        max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(st.data())
    def one(data: st.DataObject) -> None:
        nonlocal tried
        tried += 1
        text = data.draw(st.sampled_from(SEEDS))
        for _ in range(data.draw(st.integers(1, 4))):
            text = mutate(data, text)
        try:
            assert_sound(text)
        except Exception:
            failures.append(traceback.format_exc(limit=3) + "\n--- input ---\n" + text[:2000])
            raise

    try:
        one()
    except Exception:
        pass  # hypothesis re-raises the shrunk failure; it is already recorded
    return tried, failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=5000)
    args = parser.parse_args()
    start = time.perf_counter()
    tried, failures = run(args.examples)
    print(f"inputs tried: {tried}; failures: {len(failures)}; {time.perf_counter() - start:.0f} s")
    for failure in failures[:3]:
        print(failure)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
