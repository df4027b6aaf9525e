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
