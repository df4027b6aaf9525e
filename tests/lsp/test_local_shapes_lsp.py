"""Every tensor's shape in the editor, through the language server: after a real probe (torch on
the CPU), inlay hints name the shapes each line of forward bound, on the lines of a helper
module the forward called too, and a hover on a local shows its shape, dtype, device,
requires_grad and bytes. An edit leaves unchanged lines marked stale and drops rewritten ones;
the `shapeHints` setting narrows the hints to submodule calls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types

from .conftest import (
    Client,
    Sessions,
    change_document,
    open_document,
    published_for,
    set_settings,
    vscode_capabilities,
)

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180)]

PROBE_WAIT = 90.0
SETTINGS = {"probe": {"device": "cpu", "iters": 2, "timeout": 90}}

HELPERS = '''import math

import torch


def scaled_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    scale = 1.0 / math.sqrt(k.size(-1))
    scores = (q @ k.transpose(-2, -1)) * scale
    return scores
'''

MODEL = '''import torch
from torch import nn
from torch.nn import functional as F

from helpers import scaled_scores


# torchdoctor: input=(2, 5, 32)
class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.n_head = 4
        self.qkv = nn.Linear(32, 96)
        self.proj = nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = scaled_scores(q, k)
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)
'''
MODEL_LINES = MODEL.split("\n")
HELPER_LINES = HELPERS.split("\n")


def line_of(lines: list[str], start: str) -> int:
    return next(n for n, text in enumerate(lines) if text.strip().startswith(start))


def capabilities() -> types.ClientCapabilities:
    caps = vscode_capabilities()
    assert caps.text_document is not None and caps.workspace is not None
    caps.text_document.inlay_hint = types.InlayHintClientCapabilities()
    caps.workspace.inlay_hint = types.InlayHintWorkspaceClientCapabilities(refresh_support=True)
    return caps


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("shapes")
    (folder / "helpers.py").write_text(HELPERS, encoding="utf-8")
    (folder / "model.py").write_text(MODEL, encoding="utf-8")
    return {"model": (folder / "model.py").as_uri(), "helpers": (folder / "helpers.py").as_uri()}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def probed(workspace: dict[str, str]) -> Any:
    sessions = Sessions()
    try:
        client = await sessions.start(capabilities=capabilities(), settings=SETTINGS)

        @client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
        def _inlay_hint_refresh(ls: Client, params: None) -> None:
            return None

        set_settings(client, SETTINGS)
        open_document(client, workspace["model"], MODEL)
        open_document(client, workspace["helpers"], HELPERS)
        await published_for(client, workspace["model"], version=1)
        answer = await asyncio.wait_for(
            client.workspace_execute_command_async(
                types.ExecuteCommandParams(
                    command="torchdoctor.server.probe",
                    arguments=[{"uri": workspace["model"], "className": "Attention"}],
                )
            ),
            PROBE_WAIT,
        )
        assert answer["target"] == "Attention", answer  # the report, as JSON
        yield client
    finally:
        await sessions.close()


async def hints(client: Client, uri: str, lines: int) -> dict[int, str]:
    everything = types.Range(types.Position(0, 0), types.Position(lines, 0))
    found = await client.text_document_inlay_hint_async(
        types.InlayHintParams(types.TextDocumentIdentifier(uri), everything)
    )
    return {hint.position.line: str(hint.label) for hint in found or []}


async def hover(client: Client, uri: str, line: int, character: int) -> str | None:
    answer = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line, character))
    )
    if answer is None:
        return None
    assert isinstance(answer.contents, types.MarkupContent)
    return answer.contents.value


async def poll(check: Callable[[], Awaitable[Any]], timeout: float = 20.0) -> Any:
    """Ask again until `check()` answers something truthy (the server applies edits and
    settings in its own time)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for the server")
        await asyncio.sleep(0.05)


def leading(label: str) -> str:
    """The named shapes, without the line table's time share and memory after them."""
    return label.split(" · ")[0]


async def test_every_assignment_line_of_forward_names_its_shapes(
    probed: Client, workspace: dict[str, str]
) -> None:
    shown = await hints(probed, workspace["model"], len(MODEL_LINES))
    expected = {
        "def forward": "→ x (2, 5, 32)",
        "q, k, v = self.qkv(x)": "→ q, k, v (2, 5, 32)",
        "q = q.view": "→ q (2, 4, 5, 8)",
        "k = k.view": "→ k (2, 4, 5, 8)",
        "v = v.view": "→ v (2, 4, 5, 8)",
        "att = scaled_scores": "→ att (2, 4, 5, 5)",
        "att = F.softmax": "→ att (2, 4, 5, 5)",
        "y = (att @ v)": "→ y (2, 5, 32)",
        "return self.proj(y)": "→ (2, 5, 32)",
    }
    for start, label in expected.items():
        assert leading(shown[line_of(MODEL_LINES, start)]) == label, start
    # `B, T, C = x.size()` binds ints: no shape hint there
    assert "(" not in leading(shown.get(line_of(MODEL_LINES, "B, T, C ="), ""))


async def test_the_helper_module_gets_hints_too(
    probed: Client, workspace: dict[str, str]
) -> None:
    shown = await hints(probed, workspace["helpers"], len(HELPER_LINES))
    assert shown[line_of(HELPER_LINES, "scores = (q @ k")] == "→ scores (2, 4, 5, 5)"
    assert shown[line_of(HELPER_LINES, "def scaled_scores")] == "→ q, k (2, 4, 5, 8)"
    assert shown[line_of(HELPER_LINES, "return scores")] == "→ (2, 4, 5, 5)"


async def test_hover_on_a_local_shows_shape_dtype_device_grad_and_bytes(
    probed: Client, workspace: dict[str, str]
) -> None:
    line = line_of(MODEL_LINES, "y = (att @ v)")
    text = await hover(probed, workspace["model"], line, MODEL_LINES[line].index("att @") + 1)
    assert text is not None
    # att is (2, 4, 5, 5) float32 from a softmax of the Linear's output: it requires grad
    assert "`att`" in text and "(2, 4, 5, 5) · float32 · cpu · requires_grad" in text
    assert f"{2 * 4 * 5 * 5 * 4} B" in text
    assert f"line {line_of(MODEL_LINES, 'att = F.softmax') + 1}" in text

    # the argument, bound at the def line
    use = line_of(MODEL_LINES, "B, T, C = x.size()")
    text = await hover(probed, workspace["model"], use, MODEL_LINES[use].index("x.size"))
    assert text is not None and "(2, 5, 32) · float32 · cpu · no grad · 1.25 KiB" in text


async def test_an_edit_keeps_unchanged_lines_stale_and_drops_rewritten_ones(
    probed: Client, workspace: dict[str, str]
) -> None:
    softmax = line_of(MODEL_LINES, "att = F.softmax")
    old = MODEL_LINES[softmax]
    new = old.replace("dim=-1", "dim=3")
    change_document(
        probed,
        workspace["model"],
        2,
        [
            types.TextDocumentContentChangePartial(
                range=types.Range(types.Position(softmax, 0), types.Position(softmax, len(old))),
                text=new,
            )
        ],
    )
    edited = workspace["model"]

    async def stale_hints() -> dict[int, str] | None:
        found = await hints(probed, edited, len(MODEL_LINES))
        return found if softmax not in found else None

    shown = await poll(stale_hints)
    assert "stale" in shown[line_of(MODEL_LINES, "q = q.view")]
    assert softmax not in shown


async def test_the_setting_limits_hints_to_submodule_calls(
    probed: Client, workspace: dict[str, str]
) -> None:
    set_settings(probed, {**SETTINGS, "shapeHints": "submodules"})
    probed.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    qkv = line_of(MODEL_LINES, "q, k, v = self.qkv(x)")
    view = line_of(MODEL_LINES, "q = q.view")

    async def narrowed() -> bool:  # the helper calls no submodule: its hints go
        return not await hints(probed, workspace["helpers"], len(HELPER_LINES))

    assert await poll(narrowed)
    shown = await hints(probed, workspace["model"], len(MODEL_LINES))
    assert leading(shown[qkv]).startswith("→ q, k, v (2, 5, 32)")
    assert "q (2, 4, 5, 8)" not in shown.get(view, "")


async def test_the_report_view_can_ask_for_the_batch_sweep(
    probed: Client, workspace: dict[str, str]
) -> None:
    answer = await asyncio.wait_for(
        probed.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="torchdoctor.server.probe",
                arguments=[
                    {
                        "uri": workspace["model"],
                        "className": "Attention",
                        "batchSweep": "1,4",
                        "maxMemoryMiB": 512,
                    }
                ],
            )
        ),
        PROBE_WAIT,
    )
    sweep = answer["batch_sweep"]
    assert [point["batch"] for point in sweep["points"]] == [1, 4]
    assert all(point["fits"] for point in sweep["points"])
    assert sweep["memory_limit_bytes"] == 512 * 1024 * 1024
    assert sweep["largest_fitting_batch"] == 4 and sweep["stopped_by"] == "list"
