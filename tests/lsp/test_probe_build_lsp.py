"""The editor's *Probe with arguments…*: constructor arguments, an input and a dtype sent
with `torchdoctor.server.probe` build and run the model as asked."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from torchdoctor.lsp.probe_build import build_options
from torchdoctor.probe.build_options import BuildOptions

from .conftest import Sessions, open_document, published_for, vscode_capabilities

pytestmark = [pytest.mark.timeout(180)]
in_server_loop = pytest.mark.asyncio(loop_scope="module")

MODEL = '''import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self, num_classes: int, hidden: int) -> None:
        super().__init__()
        self.body = nn.Linear(4, hidden)
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return self.head(torch.relu(self.body(x))) * scale
'''
SETTINGS = {"probe": {"device": "cpu", "iters": 2, "timeout": 90}}
PROBE_WAIT = 90.0


def test_build_fields_of_the_request() -> None:
    payload = {"uri": "file:///m.py", "className": "C", "init": {"hidden": 3},
               "dtype": "bf16", "amp": True, "channelsLast": True}
    assert build_options((payload,)) == BuildOptions(
        init={"hidden": 3}, dtype="bfloat16", amp="auto", channels_last=True
    )
    assert build_options(("file:///m.py", "C")) == BuildOptions()
    for bad in ({"init": [1]}, {"dtype": 3}, {"channelsLast": "yes"}, {"dtype": "int64"},
                {"amp": "float64"}, {"factory": "no colon"}):
        with pytest.raises(ValueError):
            build_options(({"uri": "file:///m.py", "className": "C", **bad},))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def session(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path: Path = tmp_path_factory.mktemp("workspace") / "classifier.py"
    sessions = Sessions()
    try:
        client = await sessions.start(capabilities=vscode_capabilities(), settings=SETTINGS)
        open_document(client, path.as_uri(), MODEL)
        await published_for(client, path.as_uri(), version=1)
        yield client, path.as_uri()
    finally:
        await sessions.close()


async def probe(client: Any, payload: dict[str, Any]) -> Any:
    params = types.ExecuteCommandParams(command="torchdoctor.server.probe", arguments=[payload])
    return await asyncio.wait_for(client.workspace_execute_command_async(params), PROBE_WAIT)


@in_server_loop
async def test_init_arguments_input_and_dtype_from_the_editor(session: Any) -> None:
    client, uri = session
    with pytest.raises(JsonRpcException) as refused:
        await probe(client, {"uri": uri, "className": "Classifier"})
    assert "num_classes, hidden" in refused.value.message
    report = await probe(client, {
        "uri": uri, "className": "Classifier", "init": {"num_classes": 3, "hidden": 5},
        "input": "(2, 4), scale=0.5", "dtype": "bfloat16",
    })
    assert report["params"]["total"] == 4 * 5 + 5 + 5 * 3 + 3
    assert report["construction"]["method"] == "init"
    assert report["precision"]["dtype"] == "bfloat16"
    assert report["input"]["spec"] == "(2, 4), scale=0.5"
    assert report["modules"][0]["output_shapes"] == [[2, 3]]
