"""Cutting the client's byte stream into messages: `Content-Length` headers, then a body.

pygls 2.1 reads a header line by line and then exactly `Content-Length` bytes. A header it cannot
read (`Content-Length: abc`) makes it take the body for headers; a length that counts more bytes
than the message has makes it wait, swallowing the messages that follow: the server stays alive
and never answers again. This framer is a pure function of the bytes it is fed: it returns each
body it can cut out, and for what it cannot read an `Unreadable` frame (answered with ParseError),
after which it resynchronises on the next `Content-Length` header.

Resynchronising is safe because the pattern `Content-Length: <digits>` followed by a real CR LF
cannot occur inside a valid JSON body: JSON has no bare CR or LF inside strings, and outside
strings it has no letters but those of true, false and null.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, cast

log = logging.getLogger("torchdoctor.lsp")

# A client that sent a message it got wrong waits for the answer and sends nothing more: after
# this long with part of a message read, what can be judged unreadable is answered.
STALL_SECONDS = 0.5
CONTENT_TYPE = "application/vscode-jsonrpc; charset=utf-8"

# where a message starts; bounded so that a search can back up by a fixed amount across chunks
HEADER_START = re.compile(rb"Content-Length[ \t]{0,16}:[ \t]{0,16}\d{1,18}[ \t]{0,16}\r\n", re.I)
HEADER_START_MAX = 128
HEADER_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+)[ \t]*:[ \t]*([^\r\n]*?)[ \t]*")
# what the start of a header line may look like while the rest of it has not arrived yet
HEADER_LINE_PREFIX = re.compile(rb"(?:[!#$%&'*+.^_`|~0-9A-Za-z-]+(?::[^\r\n]*)?)?\r?")
HEADER_END = b"\r\n\r\n"
MAX_HEADER_BYTES = 8192
# unreadable bytes are kept only as far as needed to find the id of the request they held
KEPT_JUNK_BYTES = 65536
ID_SCAN_BYTES = 65536
BETWEEN_MESSAGES = b" \t\r\n"


@dataclass(frozen=True)
class Body:
    """The bytes of one message, as its header counted them."""

    data: bytes


@dataclass(frozen=True)
class Unreadable:
    """Bytes that are not a message; `request_id` is the id they carried, when one is legible."""

    reason: str
    request_id: int | str | None


Frame = Body | Unreadable


def framed(text: str) -> bytes:
    """One message's JSON text with its header, as pygls frames the messages it sends."""
    body = text.encode("utf-8")
    header = f"Content-Length: {len(body)}\r\nContent-Type: {CONTENT_TYPE}\r\n\r\n"
    return header.encode("ascii") + body


class FrameReceiver(Protocol):
    def receive_body(self, body: bytes) -> None: ...

    def receive_unreadable(self, request_id: int | str | None, reason: str) -> None: ...


def deliver_frames(frames: Iterable[Frame], receiver: FrameReceiver) -> None:
    """Hand each frame to `receiver`; a message that breaks it does not stop the others."""
    for frame in frames:
        try:
            if isinstance(frame, Body):
                receiver.receive_body(frame.data)
            else:
                log.warning("unreadable input from the client: %s", frame.reason)
                receiver.receive_unreadable(frame.request_id, frame.reason)
        except BrokenPipeError:
            raise  # the client has gone: nobody is left to serve
        except Exception:  # one message that breaks the server must not end the serving
            log.exception("could not handle a message")


class MessageFramer:
    def __init__(self) -> None:
        self._buffer = bytearray()
        self._length: int | None = None  # the declared length of the body being read
        self._body_start = 0
        self._scanned = 0  # how far the body or the junk has been searched for a header
        self._junk_reason: str | None = None  # set while skipping to the next header

    @property
    def pending(self) -> bool:
        """Part of a message has arrived and the rest has not."""
        return bool(self._buffer)

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames: list[Frame] = []
        while (frame := self._next_frame()) is not None:
            frames.append(frame)
        return frames

    def stalled(self) -> list[Frame]:
        """Nothing more arrived for a while. A client that waits for an answer sends nothing
        more, so bytes that can already be judged unreadable are answered now: a body shorter
        than its header said (it is complete JSON already), or junk that holds a body."""
        buffer = self._buffer
        if self._junk_reason is not None:
            if b"{" not in buffer:
                return []  # a bad header whose body has not come yet
            frame = Unreadable(self._junk_reason, request_id_in(bytes(buffer)))
        elif self._length is not None:
            if len(buffer) >= self._body_start + self._length:
                # a body held back to see what follows it: nothing did
                body = bytes(buffer[self._body_start : self._body_start + self._length])
                self._reset(self._body_start + self._length)
                return [Body(body)]
            body = bytes(buffer[self._body_start :])
            if not _is_complete_json(body):
                return []
            reason = "the message is shorter than its Content-Length"
            frame = Unreadable(reason, request_id_in(body))
        else:
            return []
        self._reset(len(buffer))
        return [frame]

    def _next_frame(self) -> Frame | None:
        if self._junk_reason is not None:
            return self._skip_junk()
        if self._length is None:
            return self._read_header()
        return self._read_body()

    def _read_header(self) -> Frame | None:
        buffer = self._buffer
        blank = len(buffer) - len(buffer.lstrip(BETWEEN_MESSAGES))
        if blank:
            del buffer[:blank]
        if not buffer:
            return None
        end = buffer.find(HEADER_END)
        complete = end >= 0
        problem, length = _read_headers(bytes(buffer[:end] if complete else buffer), complete)
        if problem is None and not complete and len(buffer) > MAX_HEADER_BYTES:
            problem = "the header is too long"
        if problem is not None:
            # search from the second byte: a header at the very start is the one that failed
            self._junk_reason, self._scanned = problem, 1
            return self._skip_junk()
        if not complete:
            return None
        assert length is not None
        self._length, self._body_start = length, end + len(HEADER_END)
        self._scanned = self._body_start
        return self._read_body()

    def _read_body(self) -> Frame | None:
        assert self._length is not None
        buffer = self._buffer
        body_end = self._body_start + self._length
        search_from = max(self._body_start, self._scanned - HEADER_START_MAX)
        limit = min(len(buffer), body_end + HEADER_START_MAX)
        found = HEADER_START.search(buffer, search_from, limit)
        if found is not None and found.start() < body_end:
            # the next message began inside the declared body: the length was too long
            body = bytes(buffer[self._body_start : found.start()])
            self._reset(found.start())
            return Unreadable("the message is shorter than its Content-Length", request_id_in(body))
        if len(buffer) < body_end:
            self._scanned = len(buffer)
            return None
        body = bytes(buffer[self._body_start : body_end])
        after = bytes(buffer[body_end : body_end + 64])
        if not after.strip(BETWEEN_MESSAGES) and not body.rstrip().endswith(b"}"):
            # not the end of a JSON object: perhaps the length was too short and the rest is on
            # its way; what comes next (or a stall) decides
            self._scanned = len(buffer)
            return None
        if not _could_start_message(after):
            if not _is_complete_json(body):
                # the length was too short: the rest of the message follows the body, and
                # together they may still show the request's id
                self._junk_reason = "the message is longer than its Content-Length"
                self._scanned = body_end
                self._length = None
                return self._skip_junk()
        self._reset(body_end)
        return Body(body)

    def _skip_junk(self) -> Frame | None:
        assert self._junk_reason is not None
        buffer = self._buffer
        found = HEADER_START.search(buffer, max(self._scanned - HEADER_START_MAX, 1))
        if found is None:
            self._scanned = len(buffer)
            if len(buffer) > KEPT_JUNK_BYTES + HEADER_START_MAX:
                # keep the head (where an id would be) and the tail (where a header may start)
                del buffer[KEPT_JUNK_BYTES : len(buffer) - HEADER_START_MAX]
                self._scanned = len(buffer)
            return None
        frame = Unreadable(self._junk_reason, request_id_in(bytes(buffer[: found.start()])))
        self._reset(found.start())
        return frame

    def _reset(self, consumed: int) -> None:
        del self._buffer[:consumed]
        self._length = None
        self._body_start = self._scanned = 0
        self._junk_reason = None


def _read_headers(block: bytes, complete: bool) -> tuple[str | None, int | None]:
    """(problem, Content-Length) of a header block; an incomplete block has no length yet but
    a problem as soon as it can no longer become a valid header."""
    lines = block.split(b"\r\n")
    partial = None if complete else lines.pop()
    length: int | None = None
    for line in lines:
        match = HEADER_LINE.fullmatch(line)
        if match is None:
            return f"not a header line: {_shown(line)}", None
        name, value = match.group(1).lower(), match.group(2)
        if name != b"content-length":
            continue  # Content-Type is the only other header, and UTF-8 the only charset
        if not value.isdigit():
            return f"Content-Length is not a number: {_shown(value)}", None
        if length is not None and length != int(value):
            return "two different Content-Length headers", None
        length = int(value)
    if partial is not None:
        if HEADER_LINE_PREFIX.fullmatch(partial) is None:
            return f"not a header line: {_shown(partial)}", None
        return None, None
    if length is None:
        return "no Content-Length header", None
    return None, length


def _could_start_message(data: bytes) -> bool:
    """Whether what follows a body (maybe only its first bytes) can be the next header."""
    data = data.lstrip(BETWEEN_MESSAGES)
    line, crlf, _ = data.partition(b"\r\n")
    if crlf:
        return HEADER_LINE.fullmatch(line) is not None
    return HEADER_LINE_PREFIX.fullmatch(line) is not None


def _shown(data: bytes) -> str:
    text = data[:60].decode("utf-8", "replace")
    return repr(text + ("…" if len(data) > 60 else ""))


def _is_complete_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


def request_id_in(data: bytes) -> int | str | None:
    """The top-level "id" of the first JSON object in `data`, which may be cut short or be
    followed by other bytes; None when there is none or it is not a valid request id."""
    text = data[:ID_SCAN_BYTES].decode("utf-8", "replace")
    start = text.find("{")
    if start < 0:
        return None
    try:
        whole, _ = json.JSONDecoder().raw_decode(text, start)
    except ValueError:
        return _scan_for_id(text, start)
    return _valid_id(whole.get("id")) if isinstance(whole, dict) else None


# JSON tokens, enough to tell keys at the top level of an object from everything nested in it
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')
_INTEGER = re.compile(r"-?\d+")


def _scan_for_id(text: str, start: int) -> int | str | None:
    depth = 0
    expect_key = False
    key: str | None = None
    after_colon = False
    for match in _TOKEN.finditer(text, start):
        token = match.group()
        if after_colon:
            if key == "id" and depth == 1:
                # a number that runs to the end of the text may have been cut short
                cut = match.end() == len(text) and not token.startswith('"')
                return None if cut else _token_id(token)
            after_colon = False
        if token in ("{", "["):
            depth += 1
            expect_key = token == "{"
        elif token in ("}", "]"):
            depth -= 1
            if depth <= 0:
                return None
        elif token == ",":
            expect_key = True  # inside an array this is wrong, but arrays hold no keys anyway
        elif token == ":":
            after_colon = True
        elif expect_key and token.startswith('"'):
            key = json.loads(token)
            expect_key = False
    return None


def _token_id(token: str) -> int | str | None:
    if token.startswith('"'):
        # _TOKEN matches a quoted token only as a whole JSON string literal: it loads as a str
        return cast(str, json.loads(token))
    return int(token) if _INTEGER.fullmatch(token) else None


def _valid_id(value: object) -> int | str | None:
    if isinstance(value, bool):
        return None
    return value if isinstance(value, int | str) else None
