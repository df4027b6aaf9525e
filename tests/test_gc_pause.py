"""The collector pause around parsing and analysis: always lifted afterwards, also when the
pauses of several threads overlap, and never lifted for a program that had it off."""

from __future__ import annotations

import gc
import threading

import pytest
from torchdoctor.analysis import Document, analyse
from torchdoctor.analysis.gc_pause import gc_paused


def test_the_collector_runs_again_after_a_pause_even_when_it_raises() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        raise RuntimeError
    assert gc.isenabled()


def test_overlapping_pauses_in_threads_end_with_the_collector_on() -> None:
    first_inside = threading.Event()
    second_done = threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with gc_paused():
            first_inside.set()
            second_done.wait(10)
            seen.append(gc.isenabled())  # the other thread's pause ended: still paused here

    thread = threading.Thread(target=first)
    thread.start()
    first_inside.wait(10)
    with gc_paused():
        pass
    second_done.set()
    thread.join(10)
    assert seen == [False]
    assert gc.isenabled()


def test_a_program_that_turned_the_collector_off_keeps_it_off() -> None:
    gc.disable()
    try:
        analyse(Document.parse("import torch\nx = torch.zeros(3)\n"))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_edit_frees_the_previous_version_without_the_collector() -> None:
    """What an analysis builds is frozen for the collector, so it must not be kept alive by
    reference cycles: the last version's semantics (with its summaries and evaluation facts)
    goes as soon as the next version is analysed."""
    import weakref

    from torchdoctor.analysis.incremental import IncrementalAnalyser

    source = (
        "import torch\n\n\n"
        "def train(model, loader, optimizer):\n"
        "    for x, y in loader:\n"
        "        loss = model(x).sum()\n"
        "        loss.backward()\n"
        "        optimizer.step()\n\n\n"
        "def evaluate(model, loader):\n"
        "    for x, y in loader:\n"
        "        model(x)\n"
    )
    analyser = IncrementalAnalyser("edited.py")
    document, _ = analyser.analyse(source)
    gone = weakref.ref(document.semantics)
    del document
    analyser.analyse(source.replace("model(x)\n", "model(x + 1)\n"))
    assert gone() is None


def test_checking_file_after_file_keeps_no_memory_of_the_files_before() -> None:
    """A batch `check` keeps nothing of a file once its findings are returned: each document's
    facts refer back to its semantics, and those cycles must stay the collector's to take."""
    import tracemalloc

    from torchdoctor.analysis import check

    from bench.corpus import make_file

    texts = [make_file(300, seed=seed) for seed in range(30)]
    check(texts[0], "first.py")
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        found = sum(len(check(text, f"file_{n}.py")) for n, text in enumerate(texts))
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    assert found > 0
    # one such file's analysis holds about 1 MB while it runs
    assert grown < 1_000_000, f"{grown:,} bytes kept after checking {len(texts)} files"
