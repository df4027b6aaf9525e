"""`torchdoctor.server.probeDistributed` through the language server: an unsaved document's
model runs on two gloo ranks under torchrun, and the answer is the report's `distributed`
section with the user's own path and lines (the ranks imported a copy of the text)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from lsprotocol import types

from .conftest import Sessions, open_document, published_for

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(180)]

MODEL = '''import torch
from torch import nn


class WithSpareHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(8, 8)
        self.spare = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)
'''
SPARE_LINE = 9  # 1-based, `self.spare = nn.Linear(8, 2)`


async def test_unused_parameters_come_back_as_td601_at_the_users_line(tmp_path: Path) -> None:
    path = tmp_path / "spare.py"  # never saved: the server probes the editor's text
    uri = path.as_uri()
    sessions = Sessions()
    try:
        client = await sessions.start(settings={"probe": {"timeout": 120}})
        open_document(client, uri, MODEL)
        await published_for(client, uri, version=1)
        token = f"ranks-{uuid.uuid4()}"
        client.progress_reports[token] = []
        params = types.ExecuteCommandParams(
            command="torchdoctor.server.probeDistributed",
            arguments=[{
                "uri": uri, "className": "WithSpareHead", "nproc": 2, "strategy": "ddp",
                "backend": "gloo", "input": "(4, 8)",
            }],
            work_done_token=token,
        )
        answer = await asyncio.wait_for(client.workspace_execute_command_async(params), 150)
    finally:
        await sessions.close()

    assert MODEL.splitlines()[SPARE_LINE - 1].strip() == "self.spare = nn.Linear(8, 2)"
    assert answer["file"] == str(path)
    (finding,) = [f for f in answer["findings"] if f["code"] == "TD601"]
    assert (finding["file"], finding["line"]) == (str(path), SPARE_LINE)
    assert finding["detail"] == "spare.weight, spare.bias"
    assert [status["status"] for status in answer["ranks"]] == ["ok", "ok"]
    assert client.progress_reports[token], "no work-done progress was reported"
