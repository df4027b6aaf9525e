"""The server's first answers come from the early front (lsp/early_start.py), before pygls is
loaded: they must be the answers the server itself gives, and the server, once loaded, must
take over without losing, repeating or reordering anything."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest
from pygls.protocol import default_converter
from pytest_lsp import client_capabilities
from torchdoctor.lsp.early_start import initialize_result
from torchdoctor.lsp.server import build_server

from .wire import INITIALIZE, WireClient

in_module_loop = pytest.mark.asyncio(loop_scope="module")
over_pipes = pytest.mark.skipif(sys.platform == "win32", reason="pipes to a child process")

# findings with fixes, one after characters outside the BMP: its columns differ per encoding
SAMPLE = """import torch
import torch.nn as nn

label = "🔥🔥"; scaler = torch.cuda.amp.GradScaler()


class Net(nn.Module):
    def __init__(self):
        self.fc = nn.Linear(2, 2)
"""


class _Capture:
    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data

    def close(self) -> None:
        pass


def servers_answer(params: dict[str, Any]) -> dict[str, Any]:
    """The `initialize` result of the pygls server itself, in this process."""
    server = build_server()
    try:
        capture = _Capture()
        server.protocol.set_writer(capture)
        message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
        server.protocol.receive_body(json.dumps(message).encode())
        body = capture.data[capture.data.index(b"\r\n\r\n") + 4 :]
        return json.loads(body)["result"]  # type: ignore[no-any-return]
    finally:
        server.close()


def vscode() -> dict[str, Any]:
    return default_converter().unstructure(client_capabilities("visual-studio-code"))  # type: ignore[no-any-return]


CLIENTS = {
    "bare": {},
    "vscode": vscode(),
    "utf-8 first": {"general": {"positionEncodings": ["utf-8", "utf-16"]}},
    "utf-32 only": {"general": {"positionEncodings": ["utf-32"]}},
    "unknown encodings": {"general": {"positionEncodings": ["utf-7", "latin-1"]}},
    "no encodings": {"general": {"positionEncodings": []}},
    "notebooks": {"notebookDocument": {"synchronization": {"dynamicRegistration": False}}},
    "notebook null": {"notebookDocument": None, "general": None},
    "will-save named": {"textDocument": {"synchronization": {"willSave": True}}},
    "will-save refused": {
        "textDocument": {"synchronization": {"willSave": False, "willSaveWaitUntil": False}}
    },
}


@pytest.mark.parametrize("name", CLIENTS)
def test_the_early_initialize_answer_is_the_servers_own(name):
    params = {"capabilities": CLIENTS[name], "processId": None}
    assert initialize_result(params) == servers_answer(params)


def _open(uri: str, text: str) -> dict[str, Any]:
    item = {"uri": uri, "languageId": "python", "version": 1, "text": text}
    return {"method": "textDocument/didOpen", "params": {"textDocument": item}}


def _initialize(capabilities: dict[str, Any]) -> dict[str, Any]:
    return {**INITIALIZE, "capabilities": capabilities}


def _published(client: WireClient, uri: str) -> list[dict[str, Any]]:
    return [
        m["params"]
        for m in client.received
        if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri
    ]


async def _until(condition: Any, client: WireClient) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened; received {client.received}")


async def _until_loaded(client: WireClient, uri: str, request_id: int) -> None:
    """A code lens is answered by the loaded server alone."""
    await client.request(request_id, "textDocument/codeLens", {"textDocument": {"uri": uri}})


@in_module_loop
@over_pipes
@pytest.mark.parametrize("encoding", ["utf-16", "utf-8"])
async def test_diagnostics_pushed_before_the_server_loads_are_the_servers_own(tmp_path, encoding):
    uri = (tmp_path / "model.py").as_uri()
    client = await WireClient.start()
    try:
        capabilities = {"general": {"positionEncodings": [encoding]}}
        answer = await client.request(1, "initialize", _initialize(capabilities))
        assert answer["result"]["capabilities"]["positionEncoding"] == encoding
        client.send({"method": "initialized", "params": {}})
        client.send(_open(uri, SAMPLE))
        await _until(lambda: _published(client, uri), client)
        await _until_loaded(client, uri, 2)
        # the server analysed the document again and found the same: it sent nothing more
        [pushed] = _published(client, uri)
        assert pushed["version"] == 1
        assert [d["code"] for d in pushed["diagnostics"]] == ["TD703", "TD301"]
        deprecated_amp = pushed["diagnostics"][0]["range"]["start"]
        assert deprecated_amp == {"line": 3, "character": 29 if encoding == "utf-8" else 25}
        pulled = await client.request(3, "textDocument/diagnostic", {"textDocument": {"uri": uri}})
        assert pulled["result"]["items"] == pushed["diagnostics"]
        # `initialize` was answered once: the server handled it again without answering
        assert len(client.answers(1)) == 1
        # an edit is the server's to answer, as usual
        change = {"range": _range(3, 0, 3, 0), "text": "# "}
        client.send(_changed(uri, 2, [change]))
        await _until(lambda: any(p["version"] == 2 for p in _published(client, uri)), client)
        assert [d["code"] for d in _published(client, uri)[-1]["diagnostics"]] == ["TD301"]
    finally:
        await client.close()


@in_module_loop
@over_pipes
async def test_a_pull_is_answered_early_and_the_server_knows_its_result_id(tmp_path):
    uri = (tmp_path / "model.py").as_uri()
    client = await WireClient.start()
    try:
        capabilities = {"textDocument": {"diagnostic": {"dynamicRegistration": False}}}
        await client.request(1, "initialize", _initialize(capabilities))
        client.send({"method": "initialized", "params": {}})
        client.send(_open(uri, SAMPLE))
        pull = {"textDocument": {"uri": uri}}
        early = (await client.request(2, "textDocument/diagnostic", pull))["result"]
        assert early["kind"] == "full"
        assert [d["code"] for d in early["items"]] == ["TD703", "TD301"]
        await _until_loaded(client, uri, 3)
        again = {**pull, "previousResultId": early["resultId"]}
        unchanged = (await client.request(4, "textDocument/diagnostic", again))["result"]
        assert unchanged == {"kind": "unchanged", "resultId": early["resultId"]}
        client.send(_changed(uri, 2, [{"range": _range(3, 0, 3, 0), "text": "# "}]))
        edited = (await client.request(5, "textDocument/diagnostic", again))["result"]
        assert edited["kind"] == "full"
        assert [d["code"] for d in edited["items"]] == ["TD301"]
        assert _published(client, uri) == []  # a pull client gets no pushes
        assert all(len(client.answers(i)) == 1 for i in range(1, 6))
    finally:
        await client.close()


@in_module_loop
@over_pipes
async def test_messages_sent_in_one_burst_at_start_are_each_answered_once(tmp_path):
    """Everything a client sends before the server has loaded: the early front answers what it
    can, the server the rest, in order; the last edit's diagnostics are what is shown."""
    uri = (tmp_path / "model.py").as_uri()
    client = await WireClient.start()
    try:
        burst = [
            {"id": 1, "method": "initialize", "params": INITIALIZE},
            {"method": "initialized", "params": {}},
            _open(uri, SAMPLE),
            {"id": 2, "method": "textDocument/codeLens", "params": {"textDocument": {"uri": uri}}},
            _changed(uri, 2, [{"text": "import torch\n"}]),
            {"id": 3, "method": "textDocument/codeLens", "params": {"textDocument": {"uri": uri}}},
        ]
        client.send_raw(b"".join(_framed(message) for message in burst))
        for request_id in (1, 2, 3):
            await client.answer(request_id)
        await _until(lambda: any(p["version"] == 2 for p in _published(client, uri)), client)
        last = _published(client, uri)[-1]
        assert last["version"] == 2 and last["diagnostics"] == []
        assert (await client.request(4, "shutdown"))["result"] is None
        client.send({"method": "exit"})
        assert await client.exit_code() == 0
        assert all(len(client.answers(i)) == 1 for i in (1, 2, 3, 4))
    finally:
        await client.close()


@in_module_loop
@over_pipes
async def test_initialize_params_the_server_would_refuse_are_left_to_the_server():
    client = await WireClient.start()
    try:
        params = {**INITIALIZE, "processId": "not a number"}
        answer = await client.request(1, "initialize", params)
        assert answer["error"]["code"] == -32602  # InvalidParams, from the server
        assert len(client.answers(1)) == 1
    finally:
        await client.close()


def _range(line: int, start: int, end_line: int, end: int) -> dict[str, Any]:
    return {
        "start": {"line": line, "character": start},
        "end": {"line": end_line, "character": end},
    }


def _changed(uri: str, version: int, changes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "method": "textDocument/didChange",
        "params": {"textDocument": {"uri": uri, "version": version}, "contentChanges": changes},
    }


def _framed(message: dict[str, Any]) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


@in_module_loop
@over_pipes
async def test_a_message_arriving_in_pieces_while_the_server_takes_over_is_read_whole(tmp_path):
    """The front's framer holds the start of a message when the server takes over the input;
    the server reads the rest with it."""
    uri = (tmp_path / "model.py").as_uri()
    client = await WireClient.start()
    try:
        await client.request(1, "initialize", INITIALIZE)
        client.send({"method": "initialized", "params": {}})
        # a request only the server answers: it starts loading now
        client.send({"id": 2, "method": "shutdown-not-yet", "params": None})
        data = _framed(_open(uri, SAMPLE + "# padding\n" * 3000))
        pieces = 100
        size = len(data) // pieces + 1
        for start in range(0, len(data), size):  # spread over about 2.5 s
            client.send_raw(data[start : start + size])
            assert client.process.stdin is not None
            await client.process.stdin.drain()
            await asyncio.sleep(0.025)
        await _until(lambda: _published(client, uri), client)
        [pushed] = _published(client, uri)
        assert [d["code"] for d in pushed["diagnostics"]] == ["TD703", "TD301"]
        assert client.answers(2)[0]["error"]["code"] == -32601  # MethodNotFound, from the server
    finally:
        await client.close()


@in_module_loop
@over_pipes
async def test_a_client_that_goes_away_before_the_server_has_loaded_ends_it(tmp_path):
    client = await WireClient.start()
    try:
        await client.request(1, "initialize", INITIALIZE)
        client.send(_open((tmp_path / "model.py").as_uri(), SAMPLE))
        assert client.process.stdin is not None
        client.process.stdin.close()
        assert await client.exit_code() == 0
    finally:
        await client.close()


EARLY_PROBE = """
import json, sys
import torchdoctor.cli, torchdoctor.lsp.launch
from torchdoctor.lsp.early_start import EarlyFront

sent = []
front = EarlyFront(send=sent.append)
with open(sys.argv[1], encoding="utf-8") as messages:
    for message in json.load(messages):
        front.receive_body(json.dumps(message).encode())
front.work()
assert "TD703" in sent[-1], sent
print(sorted(m for m in ("pygls", "lsprotocol", "attrs", "cattrs", "rich") if m in sys.modules))
"""


def test_the_start_needs_neither_pygls_nor_lsprotocol(tmp_path):
    """What runs before the server has loaded, up to the first diagnostics, imports neither:
    importing them is the second the early front saves."""
    messages = tmp_path / "messages.json"
    opened = _open((tmp_path / "model.py").as_uri(), SAMPLE)
    initialize = {"id": 1, "method": "initialize", "params": INITIALIZE}
    messages.write_text(json.dumps([{"jsonrpc": "2.0", **m} for m in (initialize, opened)]))
    done = subprocess.run(
        [sys.executable, "-c", EARLY_PROBE, str(messages)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
