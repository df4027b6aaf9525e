"""The framer alone: the same frames however the stream is cut into chunks, and the id of a
broken request read wherever it can be."""

from __future__ import annotations

import json
import random

import pytest
from torchdoctor.lsp.framing import Body, MessageFramer, Unreadable, request_id_in


def framed(message: dict[str, object]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


GOOD = [framed({"jsonrpc": "2.0", "id": n, "method": "m", "params": {"n": n}}) for n in range(4)]
BROKEN_REQUEST = json.dumps({"jsonrpc": "2.0", "id": 41, "method": "m"}).encode()
STREAM = b"".join(
    [
        GOOD[0],
        b"Content-Length: x1\r\n\r\n" + BROKEN_REQUEST,
        GOOD[1],
        b"Content-Length: 12\r\n\r\n" + BROKEN_REQUEST,  # too short: the rest follows as junk
        b"\r\n",  # blank lines between messages are harmless
        GOOD[2],
        b"Content-Length: %d\r\n\r\n" % (len(BROKEN_REQUEST) + 30) + BROKEN_REQUEST,
        GOOD[3],
    ]
)
EXPECTED = [
    Body(GOOD[0].partition(b"\r\n\r\n")[2]),
    Unreadable("Content-Length is not a number: 'x1'", 41),
    Body(GOOD[1].partition(b"\r\n\r\n")[2]),
    Unreadable("the message is longer than its Content-Length", 41),
    Body(GOOD[2].partition(b"\r\n\r\n")[2]),
    Unreadable("the message is shorter than its Content-Length", 41),
    Body(GOOD[3].partition(b"\r\n\r\n")[2]),
]


def frames_of(chunks: list[bytes]) -> list[object]:
    framer = MessageFramer()
    frames: list[object] = []
    for chunk in chunks:
        frames.extend(framer.feed(chunk))
    return frames


def test_the_whole_stream_at_once():
    assert frames_of([STREAM]) == EXPECTED


def test_one_byte_at_a_time():
    assert frames_of([STREAM[i : i + 1] for i in range(len(STREAM))]) == EXPECTED


@pytest.mark.parametrize("seed", range(20))
def test_random_chunks(seed):
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(STREAM)), 12))
    chunks = [STREAM[a:b] for a, b in zip([0, *cuts], [*cuts, len(STREAM)], strict=True)]
    assert frames_of(chunks) == EXPECTED


def test_a_stall_answers_a_body_the_length_overstated_but_not_one_still_arriving():
    framer = MessageFramer()
    body = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "m"}).encode()
    assert framer.feed(b"Content-Length: 999\r\n\r\n" + body[:10]) == []
    assert framer.stalled() == []  # a body that is not complete JSON may still be on its way
    assert framer.feed(body[10:]) == []
    assert framer.stalled() == [Unreadable("the message is shorter than its Content-Length", 5)]
    assert not framer.pending
    assert framer.feed(GOOD[0]) == [Body(GOOD[0].partition(b"\r\n\r\n")[2])]


def test_junk_without_a_header_is_held_until_a_header_or_a_stall():
    framer = MessageFramer()
    assert framer.feed(BROKEN_REQUEST) == []
    assert framer.stalled() == [
        Unreadable(f"not a header line: {BROKEN_REQUEST[:60].decode()!r}", 41)
    ]
    assert framer.feed(b"Content-Type: text/plain\r\n") == []
    assert framer.stalled() == []  # a header whose end has not come yet


def test_long_junk_is_not_kept_whole():
    framer = MessageFramer()
    framer.feed(b"\x00" * 5_000_000)
    assert len(framer._buffer) < 100_000
    assert framer.feed(GOOD[1])[-1] == Body(GOOD[1].partition(b"\r\n\r\n")[2])


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"jsonrpc": "2.0", "id": 3, "method": "m"}', 3),
        (b'{"jsonrpc": "2.0", "id": "a-1", "method": "m", "params": {"te', "a-1"),
        (b'{"params": {"id": 9, "x": [{"id": 8}]}, "id": 4, "method": "m"', 4),
        (b'{"params": {"id": 9}, "method": "m"', None),  # only a nested id
        (b'{"jsonrpc": "2.0", "id": 12', None),  # the number may go on: 123…
        (b'{"jsonrpc": "2.0", "id": true}', None),
        (b'{"jsonrpc": "2.0", "id": 1.5, "method": "m"}', None),
        (b"not json at all", None),
    ],
)
def test_request_id_in(data, expected):
    assert request_id_in(data) == expected
