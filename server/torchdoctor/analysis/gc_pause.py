"""Keep the cyclic garbage collector out of one parse or analysis.

Parsing a file builds tens of thousands of AST nodes, and the collector, triggered by allocation
counts, scans them (and, in a long-lived process, everything else on the heap) several times
while they are being built: a third of a large file's analysis time went to collections that
found nothing, since trees and the indexes over them hold no reference cycles and are freed by
reference counting alone. Collections resume as soon as the work is done.

An editor's analysis (`gc_paused(freeze=True)`, the incremental analyser's) also freezes what
it built once the work is done (`gc.freeze()`): a language server keeps the last version's tree
and indexes while the next keystroke's work allocates, and every tenth young collection would
otherwise scan the tens of thousands of objects the last keystrokes built (about 20 ms on a
3,000-line file, one keystroke in ten), only to find them alive. Frozen objects are still freed
by reference counting as usual, and an edit leaves few cycles (a version's derived facts are
dropped with it, see semantics.merge_blocks; what remains is mostly the recursive closure each
`ast.dump` call makes). So that those are not kept for good, every `THAW_EVERY`-th freezing
pause hands the frozen objects back to the collector's oldest generation instead.

A batch analysis (`check`, one file after another) never freezes: nothing keeps its document,
whose facts refer back to its semantics, so each file's cycles are garbage the collector must
be free to take. Frozen, a run over 256 files kept all of them (2 MB each). Instead it frees
the document before its pause ends (`engine.check`, `reporting.checking.check_source`): the
first collection after a pause scans every object the pause left alive, and a file's tree and
indexes, still alive, made it scan tens of thousands of objects only to keep them.

`gc.disable()` is process-wide while the language server analyses documents in several threads,
so the pause is counted: the first thread in turns the collector off, the last one out turns it
back on, and only if it was on when the first one came in (a program that runs with the
collector off keeps it off).
"""

from __future__ import annotations

import gc
import threading

THAW_EVERY = 256

_lock = threading.Lock()
_holders = 0
_was_enabled = False
_pauses = 0
_freezing = False  # whether a pause of the current run asked to freeze


class gc_paused:  # lower case: used like the function it was, `with gc_paused():`
    """No cyclic collection while the block runs; re-entrant and thread-safe. With `freeze`,
    what the block built is frozen when the last pause ends (for a result that is kept). A
    class rather than a generator context manager: a check enters three, and each costs a
    fifth as much."""

    __slots__ = ("_freeze",)

    def __init__(self, freeze: bool = False) -> None:
        self._freeze = freeze

    def __enter__(self) -> None:
        global _holders, _was_enabled, _freezing
        with _lock:
            if _holders == 0:
                _was_enabled = gc.isenabled()
                _freezing = False
                gc.disable()
            _holders += 1
            _freezing = _freezing or self._freeze

    def __exit__(self, *exception: object) -> None:
        global _holders, _pauses
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                if _freezing:
                    _pauses += 1
                    if _pauses % THAW_EVERY:
                        gc.freeze()
                    else:
                        gc.unfreeze()
                gc.enable()
