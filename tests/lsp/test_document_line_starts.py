"""An edit updates the document's line starts in place of finding them all again; they must be
the ones a fresh scan finds, whatever the edit does to \\r, \\n and \\r\\n at its edges."""

from __future__ import annotations

import random

import pytest
from lsprotocol import types
from torchdoctor.lsp.documents import OpenDocument

PIECES = ["a", "bc", "é", "😀", "\n", "\r", "\r\n", "\n\r", "x = 1\n"]


def random_text(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(PIECES) for _ in range(length))


def fresh_line_starts(text: str) -> list[int]:
    return OpenDocument("file:///x.py", text, 1).line_starts()


def position_of(document: OpenDocument, offset: int) -> types.Position:
    """The UTF-16 position of a character offset (what a client would send)."""
    starts = document.line_starts()
    line = max(i for i, start in enumerate(starts) if start <= offset)
    before = document.text[starts[line] : offset]
    return types.Position(line, len(before.encode("utf-16-le")) // 2)


def off_line_breaks(text: str, offset: int) -> int:
    """No position lies between the \r and the \n of one line break."""
    return (
        offset - 1 if 0 < offset < len(text) and text[offset - 1 : offset + 1] == "\r\n" else offset
    )


@pytest.mark.parametrize("seed", range(40))
def test_edits_keep_the_line_starts_of_a_fresh_scan(seed):
    rng = random.Random(seed)
    document = OpenDocument("file:///x.py", random_text(rng, 30), 1)
    expected_text = document.text
    for _ in range(60):
        start = off_line_breaks(document.text, rng.randint(0, len(document.text)))
        end = off_line_breaks(document.text, rng.randint(start, min(len(document.text), start + 6)))
        new_text = random_text(rng, rng.randint(0, 3))
        change = types.TextDocumentContentChangePartial(
            range=types.Range(position_of(document, start), position_of(document, end)),
            text=new_text,
        )
        document.apply(change, "utf-16")
        expected_text = expected_text[:start] + new_text + expected_text[end:]
        assert document.text == expected_text
        assert document.line_starts() == fresh_line_starts(document.text)
