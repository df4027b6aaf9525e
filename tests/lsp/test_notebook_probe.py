"""Probing a model class defined in a notebook cell: the CodeLens sits over the class in its
cell, and the probe runs only the imports, definitions and constant assignments of the cells up
to the class (in a real torch subprocess on the CPU); the report says so."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types

from .conftest import Sessions, wait_until
from .test_notebooks import cell_uri, notebook_capabilities, open_notebook

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180)]

PROBE_WAIT = 90.0  # the worker imports torch first


def cells(marker: Path) -> list[tuple[str, str, str]]:
    return [
        (
            "imports",
            "python",
            "import pathlib\nimport torch\nfrom torch import nn\nHIDDEN = 2 * 2\n",
        ),
        # a data-loading / training cell: the probe must never run it
        (
            "train",
            "python",
            f"pathlib.Path({str(marker)!r}).write_text('ran')\n"
            "raise RuntimeError('a training cell ran')\n",
        ),
        (
            "model",
            "python",
            "class Tiny(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.fc = nn.Linear(3, HIDDEN)\n"
            "\n"
            "    def forward(self, x):\n"
            "        return self.fc(x)\n",
        ),
        ("after", "python", "model = Tiny()\nprint(model(torch.randn(2, 3)))\n"),
    ]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def probed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple]:
    folder = tmp_path_factory.mktemp("notebook-probe")
    marker = folder / "training-ran.txt"
    uri = (folder / "model.ipynb").as_uri()  # never saved: the editor's cells are probed
    sessions = Sessions()
    try:
        client = await sessions.start(
            capabilities=notebook_capabilities(),
            settings={"probe": {"device": "cpu", "iters": 3, "timeout": 90}},
        )
        open_notebook(client, uri, cells(marker))
        await wait_until(lambda: any(p.uri == cell_uri("model") for p in client.published))
        yield client, uri, marker
    finally:
        await sessions.close()


async def test_the_probe_lens_is_over_the_class_in_its_cell(probed) -> None:
    client, uri, _ = probed
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(types.TextDocumentIdentifier(cell_uri("model")))
    )
    (lens,) = lenses
    assert lens.range.start.line == 0
    assert lens.command is not None and list(lens.command.arguments) == [uri, "Tiny"]
    other = await client.text_document_code_lens_async(
        types.CodeLensParams(types.TextDocumentIdentifier(cell_uri("imports")))
    )
    assert not other


async def test_probing_runs_only_the_definitions_above_the_class(probed) -> None:
    client, uri, marker = probed
    report = await asyncio.wait_for(
        client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="torchdoctor.server.probe",
                arguments=[{"uri": uri, "className": "Tiny"}],
            )
        ),
        PROBE_WAIT,
    )
    assert report["params"]["total"] == 3 * 4 + 4  # Linear(3, HIDDEN) with HIDDEN = 2 * 2
    assert not marker.exists(), "the training cell ran during the probe"
    assert report["warnings"][0].startswith("Probed from a notebook: only the imports")
