"""Fuzzing the analysis with mutated real code: it never raises, stays within a time bound per
file, and every range it reports lies inside the document. Bounded so the suite stays fast;
`python -m bench.fuzz` runs the same strategies for longer."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torchdoctor.reporting.source import decode_source

from bench.fuzz import SEEDS, assert_sound, mutate


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
