"""The lifecycle the LSP specification sets: before `initialize` a request is answered with
ServerNotInitialized and a notification is dropped (but `exit` exits); after `shutdown` every
request is answered with InvalidRequest; `exit` ends the process with 0 after a shutdown and 1
without. pygls answered requests before `initialize` with null and never answered the ones after
`shutdown`."""

from __future__ import annotations

import sys

import pytest
from lsprotocol import types

from .test_hover import API_SAMPLE, position_of
from .wire import INITIALIZE, WireClient

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(sys.platform == "win32", reason="pipes to a child process"),
]


def hover_params(uri: str) -> dict[str, object]:
    where = position_of(API_SAMPLE, ".view(-1)", 2)
    return {
        "textDocument": {"uri": uri},
        "position": {"line": where.line, "character": where.character},
    }


def did_open(uri: str) -> dict[str, object]:
    item = {"uri": uri, "languageId": "python", "version": 1, "text": API_SAMPLE}
    return {"method": "textDocument/didOpen", "params": {"textDocument": item}}


async def test_before_initialize_requests_get_server_not_initialized(tmp_path):
    early, later = (tmp_path / "early.py").as_uri(), (tmp_path / "later.py").as_uri()
    client = await WireClient.start()
    try:
        answer = await client.request(1, "textDocument/hover", hover_params(early))
        assert answer["error"]["code"] == types.ErrorCodes.ServerNotInitialized, answer
        assert "result" not in answer
        # params that do not fit are no reason to run it either
        answer = await client.request(2, "textDocument/hover", {"position": "nowhere"})
        assert answer["error"]["code"] == types.ErrorCodes.ServerNotInitialized, answer
        client.send(did_open(early))  # dropped: the server knows no client yet

        assert "capabilities" in (await client.request(3, "initialize", INITIALIZE))["result"]
        client.send({"method": "initialized", "params": {}})
        again = await client.request(4, "initialize", INITIALIZE)
        assert again["error"]["code"] == types.ErrorCodes.InvalidRequest, again

        client.send(did_open(later))
        opened = await client.request(5, "textDocument/hover", hover_params(later))
        assert "view" in opened["result"]["contents"]["value"]
        dropped = await client.request(6, "textDocument/hover", hover_params(early))
        assert dropped["result"] is None  # the early didOpen never happened
    finally:
        await client.close()


async def test_after_shutdown_requests_get_invalid_request_and_exit_exits_with_0(tmp_path):
    uri = (tmp_path / "api.py").as_uri()
    client = await WireClient.start()
    try:
        await client.request(1, "initialize", INITIALIZE)
        client.send({"method": "initialized", "params": {}})
        client.send(did_open(uri))
        assert (
            "view"
            in (await client.request(2, "textDocument/hover", hover_params(uri)))["result"][
                "contents"
            ]["value"]
        )
        assert (await client.request(3, "shutdown"))["result"] is None
        for msg_id, method, params in (
            (4, "textDocument/hover", hover_params(uri)),
            (5, "textDocument/codeLens", {"textDocument": {"uri": uri}}),
            (6, "shutdown", None),
            (7, "textDocument/hover", {"wrong": "shape"}),
        ):
            answer = await client.request(msg_id, method, params)
            assert answer["error"]["code"] == types.ErrorCodes.InvalidRequest, answer
        client.send({"method": "exit"})
        assert await client.exit_code() == 0
    finally:
        await client.close()


async def test_exit_before_initialize_exits_with_1():
    client = await WireClient.start()
    try:
        client.send({"method": "textDocument/didClose", "params": {}})  # dropped, not fatal
        client.send({"method": "exit"})
        assert await client.exit_code() == 1
    finally:
        await client.close()
