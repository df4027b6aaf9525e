"""The open documents, kept as the client sees them.

pygls' own workspace splits lines with `str.splitlines`, which also breaks at \\x0c, \\x1c-\\x1e,
\\x85, \\u2028 and \\u2029: an incremental edit below such a character lands on the wrong line.
This store splits only at \\r\\n, \\r and \\n, as LSP does, and uses the negotiated encoding.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field

from lsprotocol import types

from ..analysis.incremental import IncrementalAnalyser
from .columns import client_to_char
from .diagnostics import DiagnosticCache
from .rule_runs import utf8_size
from .uris import uri_to_path

LINE_START = re.compile(r"\r\n|\r|\n")


@dataclass
class OpenDocument:
    uri: str
    text: str
    version: int
    language_id: str = "python"
    # the offset at which each line starts, computed on demand and dropped on every change
    _line_starts: list[int] | None = field(default=None, repr=False)
    # parses each version of this document again only where an edit changed it; used by the
    # one analysis of this document that runs at a time
    analyser: IncrementalAnalyser = field(
        default_factory=IncrementalAnalyser, repr=False, compare=False
    )
    # the diagnostics of the findings of the last analysis, reused for the findings it keeps
    converted: DiagnosticCache = field(default_factory=DiagnosticCache, repr=False, compare=False)
    # the user has been told that this document is too large to analyse; told again only after
    # it has been small enough once (or is closed and opened again)
    told_too_large: bool = field(default=False, repr=False, compare=False)

    @property
    def path(self) -> str | None:
        return uri_to_path(self.uri)

    def utf8_size(self) -> int:
        return utf8_size(self.text)

    def line_starts(self) -> list[int]:
        if self._line_starts is None:
            starts = [0]
            starts.extend(match.end() for match in LINE_START.finditer(self.text))
            self._line_starts = starts
        return self._line_starts

    def line_text(self, line: int) -> str:
        starts = self.line_starts()
        if not 0 <= line < len(starts):
            return ""
        end = starts[line + 1] if line + 1 < len(starts) else len(self.text)
        return self.text[starts[line] : end].rstrip("\r\n")

    def offset_at(self, position: types.Position, encoding: str) -> int:
        starts = self.line_starts()
        if position.line >= len(starts):
            return len(self.text)
        line = max(0, position.line)
        return starts[line] + client_to_char(self.line_text(line), position.character, encoding)

    def apply(self, change: types.TextDocumentContentChangeEvent, encoding: str) -> None:
        if isinstance(change, types.TextDocumentContentChangePartial):
            start = self.offset_at(change.range.start, encoding)
            end = max(start, self.offset_at(change.range.end, encoding))
            starts = self.line_starts()
            self.text = self.text[:start] + change.text + self.text[end:]
            # finding every line start again costs 50 ms a keystroke on a 5 MB document
            self._line_starts = updated_line_starts(starts, self.text, start, end, len(change.text))
        else:
            self.text = change.text
            self._line_starts = None


def updated_line_starts(
    starts: list[int], text: str, start: int, end: int, inserted: int
) -> list[int]:
    """The line starts of `text`, made by putting `inserted` characters in place of the
    characters [start, end) of the text that `starts` belongs to.

    Whether a position begins a line depends on the character before it and, for a \r, the
    one at it (\r\n is one break). So only the positions from `start` to the end of the
    inserted text can change; those before stay, those after move by the change in length.
    """
    window_end = start + inserted
    breaks = LINE_START.finditer(text, max(start - 1, 0), min(window_end + 1, len(text)))
    inside = [found.end() for found in breaks if start <= found.end() <= window_end]
    before = starts[: bisect_left(starts, start)] if start > 0 else [0]
    after = starts[bisect_right(starts, end) :]
    delta = inserted - (end - start)
    if delta:
        after = [position + delta for position in after]
    return before + inside + after


class DocumentStore:
    def __init__(self) -> None:
        self._documents: dict[str, OpenDocument] = {}

    def open(self, item: types.TextDocumentItem) -> OpenDocument:
        document = OpenDocument(item.uri, item.text, item.version, item.language_id)
        self._documents[item.uri] = document
        return document

    def change(
        self, params: types.DidChangeTextDocumentParams, encoding: str
    ) -> OpenDocument | None:
        document = self._documents.get(params.text_document.uri)
        if document is None:
            return None
        for change in params.content_changes:
            document.apply(change, encoding)
        document.version = params.text_document.version
        return document

    def close(self, uri: str) -> OpenDocument | None:
        return self._documents.pop(uri, None)

    def get(self, uri: str) -> OpenDocument | None:
        return self._documents.get(uri)

    def __iter__(self) -> Iterator[OpenDocument]:
        return iter(list(self._documents.values()))

    def __len__(self) -> int:
        return len(self._documents)
