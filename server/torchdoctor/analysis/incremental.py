"""Successive versions of one document, parsed again only where they changed.

A keystroke in an editor changes one top-level statement of a file; parsing the whole file again
costs tens of milliseconds on a few thousand lines, parsing that statement a fraction of one.
`IncrementalAnalyser` keeps the tree of the last version that parsed whole and, when the new
text has as many lines, parses only the lines between the last unchanged top-level statement
before the change and the first unchanged one after it, at their real line numbers, and reuses
the other statements' nodes as they are. Semantics and rules then run on the whole tree as for
a fresh parse (their facts are document-wide: which names hold models, optimizers and loaders,
the class hierarchy, the imports), so the findings are those of `analyse(Document.parse(text))`.

Why the spliced tree equals `ast.parse(text)`: the lines before the region are unchanged and,
in the previous version, ended a top-level statement at its last line (with no backslash
continuing it), so the tokenizer enters the region in the same clean state as a fresh parse of
the region alone: no open bracket or string, indentation at column 0. The region parsed alone
ends the same way (else it would not parse, or it ends on a backslash and is refused), and the
unchanged lines after it start a top-level statement at column 0, which no statement can
continue (`else:`, `except:`, a decorator's function all belong to the statement they follow
and would have made that line part of it before). Whatever falls outside this reasoning falls
back to a full parse: a different line count, a region that does not parse, a base version
that did not parse whole, NUL characters, or `from __future__ import barry_as_FLUFL` (which changes
how `<>` parses).
"""

from __future__ import annotations

import ast

from .config import Config
from .document import Document, _try_parse
from .engine import analyse
from .findings import Finding
from .gc_pause import gc_paused
from .lines import LineIndex


class IncrementalAnalyser:
    """Parses and analyses the versions of one document in turn. Not thread-safe: a document is
    analysed by one thread at a time (the language server never runs two analyses of one
    document at once)."""

    def __init__(self, path: str = "<unknown>") -> None:
        self.path = path
        self._previous: Document | None = None

    def parse(self, text: str, path: str | None = None) -> Document:
        """The document for `text`, equal to `Document.parse(text, path)` (the analyser's own
        path when none is given: a renamed file keeps its parse)."""
        path = self.path if path is None else path
        with gc_paused():
            document = reparse(self._previous, text, path)
            if document is None:
                document = Document.parse(text, path)
        # Only a tree that is exactly `ast.parse(text)` may lend its statements to a later
        # version. While the user types through code that does not parse, the last version that
        # did stays the base: the next one that parses again differs from it by a few lines.
        if document.parsed_whole:
            self._previous = document
        return document

    def analyse(
        self, text: str, config: Config | None = None, path: str | None = None
    ) -> tuple[Document, list[Finding]]:
        """The document for `text` and its findings, equal to those of a fresh analysis."""
        with gc_paused():
            document = self.parse(text, path)
            return document, analyse(document, config)

    def forget(self) -> None:
        self._previous = None


def reparse(previous: Document | None, text: str, path: str) -> Document | None:
    """`Document.parse(text, path)` built from `previous` by parsing only the changed region,
    or None when the reuse cannot be shown to give the same tree."""
    if previous is None or not previous.parsed_whole:
        return None
    if "\0" in text or "barry_as_FLUFL" in text:
        return None
    if text == previous.text:
        return Document(text, path, previous.index, previous.tree, [], True)
    index = LineIndex.of(text)
    new_lines, old_lines = index.lines, previous.index.lines
    count = len(new_lines)
    if count != len(old_lines):
        return None
    first = 0
    while first < count and new_lines[first] == old_lines[first]:
        first += 1
    if first == count:
        # only the line breaks differ: the tokenizer reads \r\n, \r and \n alike
        return Document(text, path, index, previous.tree, [], True)
    last = count - 1
    while last > first and new_lines[last] == old_lines[last]:
        last -= 1
    before, after, region_start, region_end = _split(previous.tree.body, first, last, count)
    if region_start > 0 and old_lines[region_start - 1].endswith("\\"):
        return None  # the statement before may continue into the region
    if new_lines[region_end].endswith("\\"):
        return None  # the region may continue into the statement after it
    source = "\n" * region_start + "\n".join(new_lines[region_start : region_end + 1])
    tree = _try_parse(source)
    if tree is None:
        return None
    module = ast.Module(body=[*before, *tree.body, *after], type_ignores=[])
    return Document(text, path, index, module, [], True)


def _split(
    body: list[ast.stmt], first: int, last: int, count: int
) -> tuple[list[ast.stmt], list[ast.stmt], int, int]:
    """The top-level statements wholly above line `first` and wholly below line `last` (0-based),
    and the lines between them. Statements that share a line (`a = 1; b = 2`) go together."""
    groups: list[tuple[int, int, list[ast.stmt]]] = []
    for statement in body:
        start = _first_line(statement)
        end = (statement.end_lineno or statement.lineno) - 1
        if groups and start <= groups[-1][1]:
            group_start, group_end, members = groups[-1]
            members.append(statement)
            groups[-1] = (group_start, max(group_end, end), members)
        else:
            groups.append((start, end, [statement]))
    before: list[ast.stmt] = []
    after: list[ast.stmt] = []
    region_start, region_end = 0, count - 1
    for start, end, members in groups:
        if end < first:
            before.extend(members)
            region_start = end + 1
        elif start > last:
            if not after:
                region_end = start - 1
            after.extend(members)
    return before, after, region_start, region_end


def _first_line(statement: ast.stmt) -> int:
    """A statement's first line, 0-based, counting its decorators."""
    line = statement.lineno
    for decorator in getattr(statement, "decorator_list", ()):
        line = min(line, decorator.lineno)
    return line - 1
