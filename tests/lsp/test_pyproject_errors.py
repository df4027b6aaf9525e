"""A pyproject.toml whose `[tool.torchdoctor]` does not parse: the editor says so in a message
and with a diagnostic at the line in pyproject.toml, and takes it away once the file parses."""

from __future__ import annotations

import pytest
from lsprotocol import types

from .conftest import codes, open_document, published_for, wait_until
from .samples import TRAINING_LOOPS

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_a_pyproject_that_does_not_parse_is_shown_at_its_line(lsp, tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "demo"\n\n[tool.torchdoctor\nignore = ["TD104"]\n')
    client = await lsp.start(root=tmp_path)
    uri = (tmp_path / "train.py").as_uri()
    open_document(client, uri, TRAINING_LOOPS)

    shown = await published_for(client, pyproject.as_uri())
    [diagnostic] = shown.diagnostics
    assert diagnostic.range.start == types.Position(3, 17)
    assert diagnostic.message.startswith("not valid TOML: Expected ']'")
    message = await wait_until(lambda: client.messages)
    assert f"{pyproject}:4:18: not valid TOML" in message[0].message
    assert "using the defaults" in message[0].message
    assert "TD104" in codes((await published_for(client, uri, version=1)).diagnostics)

    pyproject.write_text('[tool.torchdoctor]\nignore = ["TD104"]\n')
    count = len(client.published)
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            [types.FileEvent(pyproject.as_uri(), types.FileChangeType.Changed)]
        )
    )
    cleared = await published_for(client, pyproject.as_uri(), after=count)
    assert list(cleared.diagnostics) == []
    again = await published_for(client, uri, after=count)
    assert "TD104" not in codes(again.diagnostics)
