"""What the server does with bytes that are not a well-formed message: it answers ParseError
(with the request's id where one can be read, else null) and goes on reading at the next
`Content-Length` header. pygls alone stayed alive and never answered again after a header it
could not read or a length that counted more bytes than were sent."""

from __future__ import annotations

import sys

import pytest
from lsprotocol import types

from .test_hover import API_SAMPLE, position_of
from .wire import INITIALIZE, WireClient, encoded, framed

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(sys.platform == "win32", reason="pipes to a child process"),
]

PARSE_ERROR = types.ErrorCodes.ParseError
INVALID_REQUEST = types.ErrorCodes.InvalidRequest


def hover_message(msg_id: int, uri: str) -> bytes:
    where = position_of(API_SAMPLE, ".view(-1)", 2)
    position = {"line": where.line, "character": where.character}
    params = {"textDocument": {"uri": uri}, "position": position}
    return encoded({"id": msg_id, "method": "textDocument/hover", "params": params})


async def started(uri: str) -> WireClient:
    client = await WireClient.start()
    assert "capabilities" in (await client.request(1, "initialize", INITIALIZE))["result"]
    client.send({"method": "initialized", "params": {}})
    item = {"uri": uri, "languageId": "python", "version": 1, "text": API_SAMPLE}
    client.send({"method": "textDocument/didOpen", "params": {"textDocument": item}})
    return client


async def assert_serving(client: WireClient, msg_id: int, uri: str) -> None:
    """The server reads and answers a good request: it has not lost its place in the stream."""
    client.send_raw(framed(hover_message(msg_id, uri)))
    answer = await client.answer(msg_id)
    assert "view" in answer["result"]["contents"]["value"], answer


def cases(uri: str) -> list[tuple[str, bytes, int | None, int]]:
    """(what is wrong, the bytes sent, the id the answer must carry, its error code)"""
    return [
        (
            "length not a number",
            b"Content-Length: abc\r\n\r\n" + hover_message(10, uri),
            10,
            PARSE_ERROR,
        ),
        (
            "no Content-Length",
            b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"
            + hover_message(11, uri),
            11,
            PARSE_ERROR,
        ),
        (
            "length too short",
            b"Content-Length: 40\r\n\r\n" + hover_message(12, uri),
            12,
            PARSE_ERROR,
        ),
        (
            "length too long, with the next message right behind",
            b"Content-Length: %d\r\n\r\n" % (len(hover_message(13, uri)) + 500)
            + hover_message(13, uri),
            13,
            PARSE_ERROR,
        ),
        (
            "body cut off inside the params",
            framed(hover_message(14, uri)[:70]),
            14,
            PARSE_ERROR,
        ),
        ("not JSON", framed(b"{this is not json"), None, PARSE_ERROR),
        (
            "not UTF-8",
            framed(
                encoded({"id": 16, "method": "textDocument/hover", "params": "x"})[:-2] + b'\xff"}'
            ),
            16,
            PARSE_ERROR,
        ),
        ("no header at all", hover_message(17, uri), 17, PARSE_ERROR),
        (
            "header lines end in LF only",
            b"Content-Length: %d\n\n" % len(hover_message(18, uri)) + hover_message(18, uri),
            18,
            PARSE_ERROR,
        ),
        ("a JSON array", framed(b"[1, 2]"), None, INVALID_REQUEST),
        (
            "no jsonrpc member",
            framed(b'{"id": 20, "method": "textDocument/hover", "params": {}}'),
            20,
            INVALID_REQUEST,
        ),
    ]


async def test_each_malformed_message_is_answered_and_the_next_one_is_read(tmp_path):
    uri = (tmp_path / "api.py").as_uri()
    client = await started(uri)
    try:
        await assert_serving(client, 2, uri)
        for number, (problem, data, msg_id, code) in enumerate(cases(uri)):
            nulls_before = len(client.answers(None))
            client.send_raw(data)
            # the good request right behind it must be read as the message it is
            await assert_serving(client, 100 + number, uri)
            if msg_id is None:
                errors = client.answers(None)[nulls_before:]
                assert len(errors) == 1, (problem, errors)
                error = errors[0]["error"]
            else:
                error = (await client.answer(msg_id))["error"]
            assert error["code"] == code, (problem, error)
        assert (await client.request(3, "shutdown"))["result"] is None
        client.send({"method": "exit"})
        assert await client.exit_code() == 0
    finally:
        await client.close()


async def test_a_length_longer_than_the_message_is_answered_when_nothing_more_comes(tmp_path):
    """The client waits for its answer and sends nothing else: the server must not wait for
    bytes that will never come."""
    uri = (tmp_path / "api.py").as_uri()
    client = await started(uri)
    try:
        body = hover_message(7, uri)
        client.send_raw(b"Content-Length: %d\r\n\r\n" % (len(body) + 1000) + body)
        assert (await client.answer(7))["error"]["code"] == PARSE_ERROR
        await assert_serving(client, 8, uri)
    finally:
        await client.close()


async def test_a_huge_message_split_into_many_writes_is_read_whole(tmp_path):
    """Resynchronising must not cut a big message that arrives in pieces."""
    uri = (tmp_path / "big.py").as_uri()
    client = await started((tmp_path / "api.py").as_uri())
    try:
        text = API_SAMPLE + "\n" + "# Content-Length: 12\r\n" * 20000
        item = {"uri": uri, "languageId": "python", "version": 1, "text": text}
        data = framed(encoded({"method": "textDocument/didOpen", "params": {"textDocument": item}}))
        assert len(data) > 400_000
        for start in range(0, len(data), 4093):
            client.send_raw(data[start : start + 4093])
            await client.process.stdin.drain()
        await assert_serving(client, 5, uri)
        assert client.answers(None) == []
    finally:
        await client.close()
