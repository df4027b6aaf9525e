"""The server process itself: it never loads torch, survives handlers that fail, exits when the
client goes away, logs where it is told to, and answers the probe command it cannot run yet."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import sys
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

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


async def test_a_probe_of_a_file_that_is_neither_open_nor_on_disk_fails_cleanly(shared, uri_of):
    client = shared
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
