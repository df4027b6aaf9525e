"""The probe through the language server: `torchdoctor.server.probe` runs a model from an open
(unsaved) document in a real torch subprocess on the CPU, and the report comes back as the
command's answer, diagnostics, inlay hints, the CodeLens title and hovers.

One server is shared by the module so that its warm worker (torch imported once) serves every
probe; the cancellation tests, which kill that worker, come last.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from .conftest import (
    ROOT,
    WAIT,
    Client,
    Sessions,
    change_document,
    engine_codes,
    open_document,
    published_for,
    pull,
    vscode_capabilities,
    wait_until,
)

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180)]

MODELS = (ROOT / "tests" / "lsp" / "probe_fixture.py").read_text(encoding="utf-8")
LINES = MODELS.split("\n")
PROBE = "torchdoctor.server.probe"
SETTINGS = {"probe": {"device": "cpu", "iters": 3, "timeout": 90}}
PROBE_WAIT = 90.0  # a cold worker imports torch first; a loaded CI machine is slow at it

# TinyNet, by arithmetic on its layer sizes: Conv2d(3, 8, 3x3) has 8 * 3 * 3 * 3 weights and
# 8 biases; Linear(8, 4) has 8 * 4 weights and 4 biases; the pooling layer has none.
CONV1_PARAMS = 8 * 3 * 3 * 3 + 8
TINYNET_PARAMS = CONV1_PARAMS + 8 * 4 + 4


def line_of(text: str, occurrence: int = 0) -> int:
    """0-based line of the `occurrence`-th line of MODELS that contains `text`."""
    found = [number for number, line in enumerate(LINES) if text in line]
    return found[occurrence]


def capabilities(*, pull_diagnostics: bool = False) -> types.ClientCapabilities:
    """VS Code's, with the inlay hints its snapshot predates."""
    caps = vscode_capabilities(pull=pull_diagnostics)
    assert caps.text_document is not None and caps.workspace is not None
    caps.text_document.inlay_hint = types.InlayHintClientCapabilities()
    caps.workspace.inlay_hint = types.InlayHintWorkspaceClientCapabilities(refresh_support=True)
    return caps


async def start(sessions: Sessions, *, pull_diagnostics: bool = False) -> Client:
    client = await sessions.start(
        capabilities=capabilities(pull_diagnostics=pull_diagnostics), settings=SETTINGS
    )
    client.inlay_hint_refreshes = 0  # type: ignore[attr-defined]

    @client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
    def _inlay_hint_refresh(ls: Client, params: None) -> None:
        client.inlay_hint_refreshes += 1  # type: ignore[attr-defined]

    return client


@pytest.fixture(scope="module")
def models_uri(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A document URI in a folder of its own; the file is never saved there."""
    path = tmp_path_factory.mktemp("workspace") / "models.py"
    return path.as_uri(), path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def session(models_uri: tuple[str, Path]) -> Any:
    sessions = Sessions()
    try:
        client = await start(sessions)
        open_document(client, models_uri[0], MODELS)
        await published_for(client, models_uri[0], version=1)
        yield client
    finally:
        await sessions.close()


def command(uri: str, class_name: str, token: str | None = None) -> types.ExecuteCommandParams:
    return types.ExecuteCommandParams(
        command=PROBE, arguments=[{"uri": uri, "className": class_name}], work_done_token=token
    )


def new_token(client: Client) -> str:
    """A client-created workDoneToken (the client must know it before progress arrives)."""
    token = f"probe-{uuid.uuid4()}"
    client.progress_reports[token] = []
    return token


async def probe(client: Client, uri: str, class_name: str, token: str | None = None) -> Any:
    return await asyncio.wait_for(
        client.workspace_execute_command_async(command(uri, class_name, token)), PROBE_WAIT
    )


def children_of(pid: int) -> list[int]:
    """Live (not zombie) child processes of `pid`, from /proc."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if fields[0] not in ("Z", "X") and int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


async def lens_titles(client: Client, uri: str) -> dict[str, str]:
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(types.TextDocumentIdentifier(uri))
    )
    return {lens.command.arguments[1]: lens.command.title for lens in lenses or []}


async def hints(client: Client, uri: str) -> dict[int, str]:
    everything = types.Range(types.Position(0, 0), types.Position(len(LINES), 0))
    found = await client.text_document_inlay_hint_async(
        types.InlayHintParams(types.TextDocumentIdentifier(uri), everything)
    )
    return {hint.position.line: str(hint.label) for hint in found or []}


async def hover_text(client: Client, uri: str, line: int, character: int) -> str:
    hovered = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line, character))
    )
    assert hovered is not None
    assert isinstance(hovered.contents, types.MarkupContent)
    return hovered.contents.value


# ---- tests ------------------------------------------------------------------------------------
async def test_probe_answers_with_the_report_and_reports_progress(session, models_uri):
    client = session
    uri, path = models_uri
    token = new_token(client)
    report = await probe(client, uri, "TinyNet", token)

    assert report["schema"] == 1
    assert report["target"] == "TinyNet"
    assert report["params"]["total"] == TINYNET_PARAMS
    assert report["file"] == str(path)  # the user's file, not the copy of the unsaved text
    assert not list(path.parent.glob("*torchdoctor*"))  # the copy is gone

    kinds = [value.kind for value in client.progress_reports[token]]
    assert kinds[0] == "begin" and kinds[-1] == "end"
    assert "report" in kinds
    percents = [v.percentage for v in client.progress_reports[token] if v.kind == "report"]
    assert any(percent and percent > 0 for percent in percents)


async def test_the_warm_worker_serves_the_next_probe(session, models_uri):
    client = session
    uri, _ = models_uri
    workers = children_of(client._server.pid)
    assert len(workers) == 1  # torch stays imported in it between probes
    await probe(client, uri, "TinyNet")
    assert children_of(client._server.pid) == workers


async def test_lens_inlay_hints_and_hover_show_the_report(session, models_uri):
    client = session
    uri, _ = models_uri
    await probe(client, uri, "TinyNet")  # the warm worker makes this cheap
    titles = await lens_titles(client, uri)
    assert titles["TinyNet"].startswith(f"Probe model · {TINYNET_PARAMS} params · ")
    assert titles["TinyNet"].endswith("B")  # ... · 3.4 ms · 79 KiB
    # a CPU forward of TinyNet takes about a millisecond: µs or ms (probe/units.py's spec)
    assert re.search(r" \d+(\.\d+)? [µm]s · ", titles["TinyNet"]), titles["TinyNet"]
    assert titles["Float64Net"] == "Probe model"

    found = await hints(client, uri)
    conv_line = line_of("x = torch.relu(self.conv1(x))")
    assert found[conv_line].startswith("→ x (2, 8, 16, 16) · ")  # the local it bound
    assert "%" in found[conv_line]
    assert found[line_of("x = self.pool(x).flatten(1)")].startswith("→ x (2, 8)")
    assert found[conv_line - 1] == "→ x (2, 3, 16, 16)"  # forward's argument, at its def line
    assert set(found) <= set(range(conv_line - 1, conv_line + 3))  # only TinyNet.forward's

    declared = line_of("self.conv1 = nn.Conv2d")
    text = await hover_text(client, uri, declared, LINES[declared].index("conv1"))
    assert "**conv1** `Conv2d`" in text
    assert "output (2, 8, 16, 16)" in text
    assert f"{CONV1_PARAMS} params" in text
    assert "FLOPs" in text
    assert "stale" not in text


async def test_results_are_marked_stale_after_an_edit(session, models_uri):
    client = session
    uri, _ = models_uri
    await probe(client, uri, "TinyNet")  # a fresh report of the text before the edit
    refreshes = client.code_lens_refreshes
    pool_line = line_of("x = self.pool(x).flatten(1)")
    old = LINES[pool_line]
    new = old.replace("flatten(1)", "flatten(start_dim=1)")
    edited = types.Range(types.Position(pool_line, 0), types.Position(pool_line, len(old)))
    change_document(
        client, uri, 2, [types.TextDocumentContentChangePartial(range=edited, text=new)]
    )
    await published_for(client, uri, version=2)

    titles = await lens_titles(client, uri)
    assert titles["TinyNet"].endswith(" (stale)")
    found = await hints(client, uri)
    conv_line = line_of("x = torch.relu(self.conv1(x))")
    assert found[conv_line].endswith(" (stale)")  # its line is unchanged
    assert pool_line not in found  # its line changed: the old shape is not shown on it
    declared = line_of("self.conv1 = nn.Conv2d")
    assert "stale" in await hover_text(client, uri, declared, LINES[declared].index("conv1"))

    # a new probe of the edited text is fresh again
    await probe(client, uri, "TinyNet")
    await wait_until(lambda: client.code_lens_refreshes > refreshes)
    assert client.inlay_hint_refreshes >= 1  # type: ignore[attr-defined]
    assert not (await lens_titles(client, uri))["TinyNet"].endswith("(stale)")
    assert (await hints(client, uri))[pool_line].startswith("→ x (2, 8)")


async def test_a_float64_tensor_in_forward_is_a_warning_on_its_line(session, models_uri):
    client = session
    uri, _ = models_uri
    after = len(client.published)
    await probe(client, uri, "Float64Net")
    published = await published_for(client, uri, after=after)
    runtime = [d for d in published.diagnostics if d.source == "torchdoctor probe"]
    assert [d.code for d in runtime] == ["float64"]
    (float64,) = runtime
    line = line_of("wide = x.double() * 2")
    assert float64.range.start.line == line == float64.range.end.line
    assert float64.severity == types.DiagnosticSeverity.Warning
    assert "float64" in float64.message
    # merged with the static diagnostics of the same text
    static = sorted(str(d.code) for d in published.diagnostics if d.source == "torchdoctor")
    text = MODELS.replace("flatten(1)", "flatten(start_dim=1)")  # the edit of the test above
    assert static == engine_codes(text)


UNUSED_HEAD = """\
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel


# torchdoctor: input=(2, 4)
class Heads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.used = nn.Linear(4, 2)
        self.spare = nn.Linear(4, 2)  # never called in forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(x)
"""


async def test_an_unused_parameter_under_ddp_is_td601_at_its_declaration(session, tmp_path):
    """The same runtime finding is TD601 (DDP raises on it) where the file wraps a model in
    DistributedDataParallel, and a plain probe warning where it does not."""
    client = session
    declared = next(n for n, line in enumerate(UNUSED_HEAD.split("\n")) if "self.spare" in line)
    with_ddp = UNUSED_HEAD + (
        "\n\ndef wrap(model: nn.Module) -> nn.Module:\n    return DistributedDataParallel(model)\n"
    )
    for name, text, expected in (
        ("ddp.py", with_ddp, "TD601"),
        ("plain.py", UNUSED_HEAD, "unused_parameter"),
    ):
        uri = (tmp_path / name).as_uri()
        open_document(client, uri, text)
        await published_for(client, uri, version=1)
        after = len(client.published)
        await probe(client, uri, "Heads")
        published = await published_for(client, uri, after=after)
        runtime = [d for d in published.diagnostics if d.source == "torchdoctor probe"]
        assert [(d.code, d.range.start.line) for d in runtime] == [(expected, declared)], name
        assert "spare" in runtime[0].message


async def test_broken_user_code_answers_with_its_file_and_line(session, models_uri):
    client = session
    uri, path = models_uri
    with pytest.raises(JsonRpcException) as raised:
        await probe(client, uri, "BrokenNet")
    assert raised.value.code == types.LSPErrorCodes.RequestFailed
    line = line_of("return self.fc(x).view(3, 5)") + 1
    assert f"{path}:{line}" in raised.value.message
    assert "shape '[3, 5]' is invalid" in raised.value.message


async def test_work_done_progress_cancel_kills_the_runner(session, models_uri):
    client = session
    uri, _ = models_uri
    server_pid = client._server.pid
    token = new_token(client)
    answer = asyncio.ensure_future(probe(client, uri, "SlowNet", token))
    # the runner has started on the model (begin came from the server, reports from the runner)
    await wait_until(lambda: len(client.progress_reports[token]) >= 3, WAIT)
    assert children_of(server_pid)
    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    with pytest.raises(JsonRpcException) as raised:
        await answer
    assert raised.value.code == types.LSPErrorCodes.RequestCancelled
    await wait_until(lambda: not children_of(server_pid), WAIT)
    assert client.progress_reports[token][-1].kind == "end"


async def test_cancel_request_kills_the_runner(session, models_uri):
    client = session
    uri, _ = models_uri
    server_pid = client._server.pid
    token = new_token(client)
    request_id = f"probe-request-{uuid.uuid4()}"
    answer = asyncio.wrap_future(
        client.protocol.send_request(
            types.WORKSPACE_EXECUTE_COMMAND, command(uri, "SlowNet", token), msg_id=request_id
        )
    )
    await wait_until(lambda: len(client.progress_reports[token]) >= 3, PROBE_WAIT)
    assert children_of(server_pid)
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=request_id))
    with pytest.raises(JsonRpcException) as raised:
        await asyncio.wait_for(answer, WAIT)
    assert raised.value.code == types.LSPErrorCodes.RequestCancelled
    await wait_until(lambda: not children_of(server_pid), WAIT)


async def test_pull_diagnostics_include_runtime_findings(lsp, tmp_path):
    client = await start(lsp, pull_diagnostics=True)
    uri = (tmp_path / "models.py").as_uri()
    open_document(client, uri, MODELS)
    before = await pull(client, uri)
    assert all(d.source != "torchdoctor probe" for d in before.items)

    refreshes = client.diagnostic_refresh_count
    await probe(client, uri, "Float64Net")
    await wait_until(lambda: client.diagnostic_refresh_count > refreshes)
    after = await pull(client, uri, previous=before.result_id)
    assert isinstance(after, types.RelatedFullDocumentDiagnosticReport)
    assert after.result_id != before.result_id
    runtime = [d for d in after.items if d.source == "torchdoctor probe"]
    assert [(d.code, d.range.start.line) for d in runtime] == [
        ("float64", line_of("wide = x.double() * 2"))
    ]
    assert sorted(str(d.code) for d in after.items if d.source == "torchdoctor") == engine_codes(
        MODELS
    )


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA device")
async def test_the_probe_runs_on_the_gpu_when_asked(lsp, tmp_path):
    client = await lsp.start(
        capabilities=capabilities(), settings={"probe": {"device": "cuda", "iters": 3}}
    )
    uri = (tmp_path / "models.py").as_uri()
    open_document(client, uri, MODELS)
    report = await probe(client, uri, "TinyNet")
    assert report["device"]["kind"] == "cuda"
    assert report["memory"]["method"] == "cuda_allocator"
    assert report["params"]["total"] == TINYNET_PARAMS


# ---- what the server lets a probe do -----------------------------------------------------------
PROBE_FIXTURES = ROOT / "tests" / "probe" / "fixtures"


async def test_a_file_outside_the_workspace_is_probed_only_once_it_is_open(lsp, tmp_path):
    workspace, elsewhere = tmp_path / "workspace", tmp_path / "elsewhere"
    workspace.mkdir()
    elsewhere.mkdir()
    outside = elsewhere / "models.py"
    outside.write_text(MODELS, encoding="utf-8")
    client = await lsp.start(capabilities=capabilities(), settings=SETTINGS, root=workspace)
    with pytest.raises(JsonRpcException) as raised:
        await probe(client, outside.as_uri(), "TinyNet")
    assert raised.value.code == types.LSPErrorCodes.RequestFailed
    assert "outside the workspace folders" in raised.value.message
    assert not children_of(client._server.pid)  # refused before any runner started

    open_document(client, outside.as_uri(), MODELS)  # the user opened it: now it is theirs
    report = await probe(client, outside.as_uri(), "TinyNet")
    assert report["params"]["total"] == TINYNET_PARAMS


async def test_editor_probes_have_a_memory_limit_and_cannot_hold_up_shutdown(lsp, tmp_path):
    settings = {"probe": {**SETTINGS["probe"], "memoryLimit": 1536}}
    client = await lsp.start(capabilities=capabilities(), settings=settings, root=tmp_path)
    grows = tmp_path / "grows.py"
    grows.write_text((PROBE_FIXTURES / "grows_without_bound.py").read_text(), encoding="utf-8")
    with pytest.raises(JsonRpcException) as raised:
        await probe(client, grows.as_uri(), "GrowsWithoutBound")
    assert "probe failed (oom)" in raised.value.message

    # a model whose child leaves the session and keeps the runner's stderr pipe open
    duration = f"303.{uuid.uuid4().int % 10**6:06d}"
    leaves = (PROBE_FIXTURES / "leaves_session.py").read_text(encoding="utf-8")
    leaves = leaves.replace('DURATION = "303"', f'DURATION = "{duration}"')
    uri = (tmp_path / "leaves.py").as_uri()
    open_document(client, uri, leaves)
    report = await probe(client, uri, "LeavesSession")
    assert report["params"]["total"] == 4 * 4 + 4
    assert await asyncio.wait_for(client.shutdown_async(None), WAIT) is None
    client.exit(None)
    assert await asyncio.wait_for(client._server.wait(), WAIT) == 0
    command_lines = [p.read_bytes() for p in Path("/proc").glob("[0-9]*/cmdline") if p.exists()]
    assert not any(duration.encode() in line for line in command_lines)
