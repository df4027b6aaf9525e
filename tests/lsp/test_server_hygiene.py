"""The server process itself: it never loads torch, survives handlers that fail, exits when the
client goes away, logs where it is told to, and answers the probe command it cannot run yet."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from torchdoctor.lsp.features import register_features
from torchdoctor.lsp.server import TorchDoctorServer
from torchdoctor.lsp.threadsafe_ast import serialise_ast_parse

from .conftest import (
    SERVER_COMMAND,
    WAIT,
    Client,
    codes,
    engine_codes,
    make_client,
    open_document,
    published_for,
    shared_session,
    vscode_capabilities,
)
from .samples import MISSING_ZERO_GRAD
from .test_hover import API_SAMPLE, hover, position_of

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

# one server for the tests that only read from it
shared = shared_session()


def torch_libraries(pid: int) -> list[str]:
    """Shared objects of torch mapped into a process: importing torch maps libtorch."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return sorted({line.split()[-1] for line in maps.splitlines() if "torch/lib" in line})


def torch_library_folder() -> Path | None:
    """Where this interpreter's torch keeps libtorch, which importing torch maps into the
    process; None when torch is not installed (the check below would then prove nothing)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "lib"
    return folder if any(folder.glob("libtorch*")) else None


async def test_the_server_never_loads_torch(shared, uri_of):
    if torch_library_folder() is None:
        pytest.skip("torch is not installed in this interpreter")
    client = shared
    uri = uri_of("api.py")
    open_document(client, uri, API_SAMPLE)
    await published_for(client, uri, version=1)
    assert await hover(client, uri, position_of(API_SAMPLE, ".view(-1)", 2)) is not None
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(types.TextDocumentIdentifier(uri))
    )
    assert lenses is not None
    assert torch_libraries(client._server.pid) == []


async def test_a_failing_request_answers_with_an_error_and_the_server_carries_on(shared, uri_of):
    client = shared
    uri = uri_of("train.py")
    open_document(client, uri, MISSING_ZERO_GRAD)
    await published_for(client, uri, version=1)

    with pytest.raises(JsonRpcException) as bad_resolve:
        await client.code_action_resolve_async(
            types.CodeAction(title="not ours", data={"something": "else"})
        )
    assert bad_resolve.value.code == types.ErrorCodes.InvalidParams
    with pytest.raises(JsonRpcException) as bad_command:
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="torchdoctor.server.fixAll", arguments=[])
        )
    assert bad_command.value.code == types.ErrorCodes.InvalidParams

    # still serving
    hovered = await hover(client, uri, position_of(MISSING_ZERO_GRAD, "loss.backward"))
    assert hovered is not None
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=2, uri=uri),
            [types.TextDocumentContentChangeWholeDocument("x = 1\n")],
        )
    )
    after = await published_for(client, uri, version=2)
    assert codes(after.diagnostics) == engine_codes("x = 1\n")


async def test_a_probe_of_a_file_that_is_neither_open_nor_on_disk_fails_cleanly(
    lsp, uri_of, tmp_path
):
    # inside the workspace, so the refusal is about the missing file, not about where it is
    client = await lsp.start(root=tmp_path)
    uri = uri_of("models.py")
    with pytest.raises(JsonRpcException) as raised:
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="torchdoctor.server.probe",
                arguments=[{"uri": uri, "className": "Net"}],
            )
        )
    assert raised.value.code == types.LSPErrorCodes.RequestFailed
    assert "not open in the editor and not on disk" in raised.value.message


async def test_the_server_exits_when_its_input_closes(lsp):
    client = await lsp.start()
    process = client._server
    process.stdin.close()
    returncode = await asyncio.wait_for(process.wait(), WAIT)
    assert returncode == 0


async def test_the_server_exits_when_its_input_closes_while_jedi_loads_torch(lsp, uri_of):
    """The editor died mid-start-up: jedi is still loading torch's stubs (seconds of CPU) and
    an analysis may be running; the server must not wait for either."""
    client = await lsp.start(settings={"hoverSignatures": True})
    uri = uri_of("train.py")
    open_document(client, uri, MISSING_ZERO_GRAD)
    process = client._server
    process.stdin.close()
    assert await asyncio.wait_for(process.wait(), 10) == 0


class RawClient:
    """JSON-RPC over the server's stdio with no schema on this side, so that it can send what
    a buggy client sends: params of the wrong shape, bodies that are not JSON."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.notifications: list[dict[str, Any]] = []

    @classmethod
    async def start(cls) -> RawClient:
        process = await asyncio.create_subprocess_exec(
            *SERVER_COMMAND,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, "TORCHDOCTOR_LOG_LEVEL": "ERROR"},
        )
        return cls(process)

    def send_body(self, body: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def send(self, message: dict[str, Any]) -> None:
        self.send_body(json.dumps({"jsonrpc": "2.0", **message}).encode())

    async def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        length = 0
        while (line := await self.process.stdout.readline()) not in (b"\r\n", b""):
            if match := re.match(rb"Content-Length: (\d+)", line, re.IGNORECASE):
                length = int(match.group(1))
        if not length:
            raise AssertionError("the server closed its output")
        return json.loads(await self.process.stdout.readexactly(length))

    async def request(self, msg_id: int, method: str, params: Any) -> dict[str, Any]:
        """The response to one request; notifications that come first are kept."""
        self.send({"id": msg_id, "method": method, "params": params})
        while True:
            message = await asyncio.wait_for(self.receive(), WAIT)
            if message.get("id") == msg_id and "method" not in message:
                return message
            self.notifications.append(message)

    async def close(self) -> int:
        if self.process.returncode is None:
            self.process.kill()
        return await self.process.wait()


async def test_requests_with_params_of_the_wrong_shape_get_an_error_answer(uri_of):
    """pygls dropped such a request without a word: the client waited for ever. Garbage
    between messages must not take the server down either."""
    client = await RawClient.start()
    try:
        initialized = await client.request(1, "initialize", {"capabilities": {}})
        assert "capabilities" in initialized["result"]
        client.send({"method": "initialized", "params": {}})
        uri = uri_of("api.py")
        client.send(
            {
                "method": "textDocument/didOpen",
                "params": {
                    "textDocument": {
                        "uri": uri,
                        "languageId": "python",
                        "version": 1,
                        "text": API_SAMPLE,
                    }
                },
            }
        )
        wrong_position = {"textDocument": {"uri": uri}, "position": {"line": "two"}}
        for msg_id, params in ((2, wrong_position), (3, None), (4, [1, 2])):
            answer = await client.request(msg_id, "textDocument/hover", params)
            assert answer["error"]["code"] == types.ErrorCodes.InvalidParams, answer
        client.send_body(b"{this is not json")
        client.send({"method": "textDocument/didChange", "params": {"contentChanges": "x"}})
        answer = await client.request(5, "torchdoctor/noSuchMethod", {})
        assert answer["error"]["code"] == types.ErrorCodes.MethodNotFound
        where = position_of(API_SAMPLE, ".view(-1)", 2)
        position = {"line": where.line, "character": where.character}
        hovered = await client.request(
            6, "textDocument/hover", {"textDocument": {"uri": uri}, "position": position}
        )
        assert "view" in hovered["result"]["contents"]["value"]
        assert (await client.request(7, "shutdown", None))["result"] is None
        client.send({"method": "exit"})
        assert await asyncio.wait_for(client.process.wait(), WAIT) == 0
    finally:
        await client.close()


class Wire:
    """Collects what an in-process server writes (one JSON message per write, no headers)."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        self.messages.append(json.loads(data))

    def answer(self, msg_id: int) -> dict[str, Any] | None:
        return next((m for m in self.messages if m.get("id") == msg_id and "method" not in m), None)


class InProcessServer:
    """The real server object and handlers, fed messages as its stdio reader feeds them; lets a
    test look at the protocol's own bookkeeping."""

    def __init__(self) -> None:
        serialise_ast_parse()
        self.server = TorchDoctorServer()
        register_features(self.server)
        self.wire = Wire()
        self.server.protocol.set_writer(self.wire, include_headers=False)

    def feed(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message})
        protocol = self.server.protocol
        protocol.handle_message(json.loads(body, object_hook=protocol.structure_message))

    async def request(self, msg_id: int, method: str, params: Any) -> dict[str, Any]:
        self.feed({"id": msg_id, "method": method, "params": params})
        deadline = time.monotonic() + WAIT
        while (answer := self.wire.answer(msg_id)) is None:
            assert time.monotonic() < deadline, f"no answer to {method}"
            await asyncio.sleep(0.01)
        return answer

    def close(self) -> None:
        self.server.close()


async def test_handled_notifications_and_requests_leave_no_bookkeeping_behind(uri_of):
    """pygls kept the future of every notification it handled (about 1.5 KB per keystroke, for
    the life of the server); the server's protocol now forgets each one when it is done."""
    lsp = InProcessServer()
    try:
        await lsp.request(1, "initialize", {"capabilities": {}})
        lsp.feed({"method": "initialized", "params": {}})
        uri = uri_of("train.py")
        item = {"uri": uri, "languageId": "python", "version": 1, "text": MISSING_ZERO_GRAD}
        lsp.feed({"method": "textDocument/didOpen", "params": {"textDocument": item}})
        start = {"line": 0, "character": 0}
        for version in range(2, 502):
            change = {"range": {"start": start, "end": start}, "text": "#" if version % 2 else ""}
            lsp.feed(
                {
                    "method": "textDocument/didChange",
                    "params": {
                        "textDocument": {"uri": uri, "version": version},
                        "contentChanges": [change],
                    },
                }
            )
            if version % 50 == 0:
                position = {"textDocument": {"uri": uri}, "position": start}
                await lsp.request(version, "textDocument/hover", position)
        lsp.feed({"method": "workspace/didChangeConfiguration", "params": {"settings": {}}})
        lsp.feed({"method": "textDocument/didClose", "params": {"textDocument": {"uri": uri}}})
        await lsp.request(9999, "shutdown", None)
        await asyncio.sleep(0.1)
        assert dict(lsp.server.protocol._request_futures) == {}
    finally:
        lsp.close()


async def test_a_handler_that_raises_answers_with_an_internal_error_and_serving_goes_on(
    uri_of, monkeypatch
):
    """Any exception out of a request handler becomes that request's error response."""
    lsp = InProcessServer()
    try:
        await lsp.request(1, "initialize", {"capabilities": {}})
        uri = uri_of("api.py")
        item = {"uri": uri, "languageId": "python", "version": 1, "text": API_SAMPLE}
        lsp.feed({"method": "textDocument/didOpen", "params": {"textDocument": item}})
        where = position_of(API_SAMPLE, ".view(-1)", 2)
        position = {"line": where.line, "character": where.character}
        params = {"textDocument": {"uri": uri}, "position": position}
        current = lsp.server.scheduler.current

        async def broken(uri: str) -> Any:
            raise RuntimeError("the analysis store is broken")

        monkeypatch.setattr(lsp.server.scheduler, "current", broken)
        failed = await lsp.request(2, "textDocument/hover", params)
        assert failed["error"]["code"] == types.ErrorCodes.InternalError
        assert "the analysis store is broken" in failed["error"]["message"]
        monkeypatch.setattr(lsp.server.scheduler, "current", current)
        answered = await lsp.request(3, "textDocument/hover", params)
        assert "view" in answered["result"]["contents"]["value"]
    finally:
        lsp.close()


async def test_exit_codes_follow_the_protocol():
    """0 after shutdown + exit; 1 after an exit without a shutdown."""
    for with_shutdown, expected in ((True, 0), (False, 1)):
        client = make_client()
        await client.start_io(*SERVER_COMMAND)
        await client.initialize_session(types.InitializeParams(capabilities=vscode_capabilities()))
        if with_shutdown:
            await client.shutdown_async(None)
        client.exit(None)
        assert await asyncio.wait_for(client._server.wait(), WAIT) == expected
        await client.stop()


async def test_log_file_option(tmp_path, uri_of):
    log = tmp_path / "server.log"
    client = make_client()
    await client.start_io(*SERVER_COMMAND, "--log-file", str(log))
    try:
        await client.initialize_session(
            types.InitializeParams(
                capabilities=vscode_capabilities(),
                initialization_options={"settings": {"locale": "klingon"}},
            )
        )
        await asyncio.sleep(0)
        uri = uri_of("x.py")
        open_document(client, uri, MISSING_ZERO_GRAD)
        await published_for(client, uri, version=1)
    finally:
        await client.shutdown_session()
        await client.stop()
    text = log.read_text(encoding="utf-8")
    assert "klingon" in text  # the settings problem is logged, not only shown


async def test_tcp_transport_for_debugging(uri_of):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = await asyncio.create_subprocess_exec(
        *SERVER_COMMAND, "--tcp", f"127.0.0.1:{port}", stderr=asyncio.subprocess.DEVNULL
    )
    client: Client = make_client()
    try:
        for _ in range(200):
            try:
                await client.start_tcp("127.0.0.1", port)
                break
            except OSError:
                await asyncio.sleep(0.05)
        else:
            raise AssertionError("the server never listened")
        await client.initialize_session(
            types.InitializeParams(capabilities=vscode_capabilities(), process_id=os.getpid())
        )
        uri = uri_of("tcp.py")
        open_document(client, uri, MISSING_ZERO_GRAD)
        published = await published_for(client, uri, version=1)
        assert "TD101" in codes(published.diagnostics)
        await client.shutdown_async(None)
        client.exit(None)
    finally:
        await client.stop()
        if process.returncode is None:
            process.kill()
        await process.wait()
