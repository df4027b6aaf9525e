"""Facts about a whole file that some rule reads while it reports on one block: "the file
converts a model to float64", "these names are trained somewhere". After an edit the rules run
only on the blocks it changed (scoped.py); a change in one of these facts can change findings
in any block, so each fact is part of the file's key, and a change means a whole-file run.

A rule module registers its facts with `@file_fact`; each is computed on the whole file's
semantics and returns something comparable (a bool, a frozenset).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from .context import RuleContext

FileFact = Callable[[RuleContext], Hashable]
FILE_FACTS: dict[str, FileFact] = {}


def file_fact(name: str) -> Callable[[FileFact], FileFact]:
    def register(fact: FileFact) -> FileFact:
        FILE_FACTS[name] = fact
        return fact

    return register


def file_facts_of(context: RuleContext) -> tuple[Hashable, ...]:
    return tuple(FILE_FACTS[name](context) for name in sorted(FILE_FACTS))
