"""Hovers that need a server of their own: the locale setting, and jedi's signatures."""

from __future__ import annotations

import sys

import pytest
from lsprotocol import types

from .conftest import open_document, published_for, wait_until
from .samples import MISSING_ZERO_GRAD
from .test_hover import API_SAMPLE, API_URI, TRAIN_URI, hover, position_of
from .test_server_hygiene import torch_libraries

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_locale_setting_overrides_the_client_language(lsp):
    client = await lsp.start(locale="zh-CN", settings={"locale": "en"})
    open_document(client, TRAIN_URI, MISSING_ZERO_GRAD)
    published = await published_for(client, TRAIN_URI, version=1)
    assert published.diagnostics[0].code_description.href.endswith("/en/TD101.md")
    result = await hover(client, TRAIN_URI, position_of(MISSING_ZERO_GRAD, "loss.backward"))
    assert result is not None
    assert result.contents.value.startswith("# TD101 missing-zero-grad\n")


@pytest.mark.timeout(120)
async def test_hover_adds_jedi_signature_and_docstring_once_warm(lsp):
    """With jedi pointed at an interpreter that has torch, hovers gain the signature and the
    docstring after the warm-up (which the server announces in its log)."""
    client = await lsp.start(settings={"hoverSignatures": True, "interpreter": sys.executable})
    open_document(client, API_URI, API_SAMPLE)
    await published_for(client, API_URI, version=1)

    ready = await wait_until(
        lambda: next((m for m in client.log_messages if "hover signatures" in m.message), None),
        timeout=100,
    )
    assert ready.type == types.MessageType.Info

    async def signature_shown() -> str | None:
        result = await hover(client, API_URI, position_of(API_SAMPLE, ".view(-1)", 2))
        text = result.contents.value if result is not None else ""
        return text if "```python" in text else None

    text = None
    for _ in range(50):
        text = await signature_shown()
        if text:
            break
    assert text is not None
    assert "view size is not compatible" in text  # the note stays first
    assert "view(" in text.split("```python", 1)[1]  # then jedi's signature
    assert "Returns a new tensor with the same data" in text  # and the docstring
    # jedi read torch in a helper process of that interpreter, not in the server
    assert torch_libraries(client._server.pid) == []
