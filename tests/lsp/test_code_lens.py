"""CodeLens "Probe model" above nn.Module subclasses."""

from __future__ import annotations

import pytest
from lsprotocol import types

from .conftest import open_document, published_for, set_settings, wait_until

pytestmark = pytest.mark.asyncio(loop_scope="module")


MODELS = '''import dataclasses

import torch
import torch.nn as tnn
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)


class ResidualEncoder(Encoder):
    """Subclass of this file's own module: still a module."""


@dataclasses.dataclass
class Settings:
    width: int = 4


class Head(tnn.Sequential):
    pass


class Deeper(ResidualEncoder):
    pass
'''


async def lenses(client, uri: str) -> list[types.CodeLens]:
    result = await client.text_document_code_lens_async(
        types.CodeLensParams(types.TextDocumentIdentifier(uri))
    )
    return list(result or [])


async def test_probe_lens_above_every_module_class(lsp, uri_of):
    client = await lsp.start()
    uri = uri_of("models.py")
    open_document(client, uri, MODELS)
    await published_for(client, uri, version=1)
    found = await lenses(client, uri)
    assert [list(lens.command.arguments) for lens in found] == [
        [uri, "Encoder"],
        [uri, "ResidualEncoder"],
        [uri, "Head"],
        [uri, "Deeper"],
    ]
    for lens in found:
        assert lens.command.command == "torchdoctor.probe"
        assert lens.command.title == "Probe model"
    lines = MODELS.split("\n")
    first = found[0].range
    assert lines[first.start.line][first.start.character : first.end.character] == "class Encoder"


async def test_lenses_follow_the_locale_setting_and_can_be_turned_off(lsp, uri_of):
    client = await lsp.start()
    uri = uri_of("models.py")
    open_document(client, uri, MODELS)
    assert {lens.command.title for lens in await lenses(client, uri)} == {"Probe model"}

    set_settings(client, {"locale": "zh-CN"})
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await wait_until(lambda: client.code_lens_refreshes >= 1)  # the editor is told to ask again
    assert {lens.command.title for lens in await lenses(client, uri)} == {"探查模型"}

    set_settings(client, {"locale": "zh-CN", "codeLens": False})
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await wait_until(lambda: client.code_lens_refreshes >= 2)
    assert len(await lenses(client, uri)) == 0
