"""Facts about a whole file that some rule reads while it reports on one block: "the file
converts a model to float64", "these names are trained somewhere". After an edit the rules run
only on the blocks it changed (scoped.py); a change in one of these facts can change findings
in any block, so each fact is part of the file's key, and a change means a whole-file run.

A rule module registers its facts with `@file_fact`; each is computed on the whole file's
semantics and returns something comparable (a bool, a frozenset). A fact is computed once per
version: the file's key and the rules that read it share the value (a fact reads the text
alone, never the configuration).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import wraps

from .context import RuleContext

FileFact = Callable[[RuleContext], Hashable]
FILE_FACTS: dict[str, FileFact] = {}


def file_fact(name: str) -> Callable[[FileFact], FileFact]:
    key = f"file-fact:{name}"

    def register(fact: FileFact) -> FileFact:
        @wraps(fact)
        def once_per_version(context: RuleContext) -> Hashable:
            derived = context.sem.whole.derived
            if key not in derived:
                derived[key] = fact(context)
            value: Hashable = derived[key]
            return value

        FILE_FACTS[name] = once_per_version
        return once_per_version

    return register


def file_facts_of(context: RuleContext) -> tuple[Hashable, ...]:
    return tuple(FILE_FACTS[name](context) for name in sorted(FILE_FACTS))
