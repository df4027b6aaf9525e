"""Positions on lines with non-ASCII text (UTF-16 and UTF-8 clients), tabs and CRLF endings."""

from __future__ import annotations

import pytest
from lsprotocol import types

from .conftest import (
    apply_text_edits,
    change_document,
    codes,
    edits_of,
    engine_codes,
    only,
    open_document,
    published_for,
    shared_session,
    vscode_capabilities,
)
from .samples import MISSING_ZERO_GRAD
from .test_code_actions import actions_at, resolved

pytestmark = pytest.mark.asyncio(loop_scope="module")
shared = shared_session()


NON_ASCII = """import torch
from torch import nn, optim

model = nn.Linear(10, 2)  # 模型 🔥
optimizer = optim.SGD(model.parameters(), lr=0.1)

total = 0
for x, y in loader:
    optimizer.zero_grad()
    loss = (model(x) - y).pow(2).mean()
    loss.backward()
    optimizer.step()
    tag = "训练🔥"; total += loss
    flat = "é🔥"; x = x.view(-1)
"""
LINE = 12  # `tag = "训练🔥"; total += loss`: TD104 on the last `loss`


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


async def test_utf16_columns_after_chinese_and_emoji(shared, uri_of):
    client = shared
    uri = uri_of("unicode.py")
    open_document(client, uri, NON_ASCII)
    diagnostic = only((await published_for(client, uri, version=1)).diagnostics, "TD104")
    line = NON_ASCII.split("\n")[LINE]
    start = line.rindex("loss")
    assert diagnostic.range == types.Range(
        types.Position(LINE, utf16(line[:start])), types.Position(LINE, utf16(line[:start]) + 4)
    )
    assert utf16(line[:start]) == start + 1  # the emoji is two UTF-16 units

    # the quick fix lands on the same characters when the editor applies it
    (fix, *_) = await actions_at(client, uri, diagnostic.range, only=["quickfix"])
    action = await resolved(client, fix)
    fixed = apply_text_edits(NON_ASCII, edits_of(action.edit, uri, version=1))
    assert fixed.split("\n")[LINE] == '    tag = "训练🔥"; total += loss.item()'

    # a hover after non-ASCII text finds the name under the cursor
    view_line = NON_ASCII.split("\n")[LINE + 1]
    character = utf16(view_line[: view_line.index("view")]) + 1
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(LINE + 1, character))
    )
    assert hover is not None and hover.contents.value.startswith("**Tensor.view**")


async def test_utf8_columns_for_a_client_that_counts_bytes(lsp, uri_of):
    capabilities = vscode_capabilities()
    capabilities.general = types.GeneralClientCapabilities(
        position_encodings=[types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf16]
    )
    client = await lsp.start(capabilities=capabilities)
    uri = uri_of("unicode.py")
    open_document(client, uri, NON_ASCII)
    diagnostic = only((await published_for(client, uri, version=1)).diagnostics, "TD104")
    line = NON_ASCII.split("\n")[LINE]
    start = len(line[: line.rindex("loss")].encode("utf-8"))
    assert diagnostic.range.start == types.Position(LINE, start)
    assert diagnostic.range.end == types.Position(LINE, start + 4)


async def test_incremental_edits_after_non_ascii_text(shared, uri_of):
    client = shared
    uri = uri_of("unicode.py")
    open_document(client, uri, NON_ASCII)
    await published_for(client, uri, version=1)
    line = NON_ASCII.split("\n")[LINE]
    start = utf16(line[: line.rindex("loss")])
    # type `.item()` right after `loss`, in UTF-16 columns
    change_document(
        client,
        uri,
        2,
        [
            types.TextDocumentContentChangePartial(
                range=types.Range(types.Position(LINE, start + 4), types.Position(LINE, start + 4)),
                text=".item()",
            )
        ],
    )
    edited = NON_ASCII.replace("total += loss", "total += loss.item()")
    published = await published_for(client, uri, version=2)
    assert codes(published.diagnostics) == engine_codes(edited)
    assert "TD104" not in codes(published.diagnostics)


async def test_tabs_count_as_one_column(shared, uri_of):
    client = shared
    uri = uri_of("tabs.py")
    text = MISSING_ZERO_GRAD.replace("    ", "\t")
    open_document(client, uri, text)
    diagnostic = only((await published_for(client, uri, version=1)).diagnostics, "TD101")
    assert diagnostic.range == types.Range(types.Position(8, 1), types.Position(8, 16))
    (fix, *_) = await actions_at(client, uri, diagnostic.range, only=["quickfix"])
    action = await resolved(client, fix)
    fixed = apply_text_edits(text, edits_of(action.edit, uri, version=1))
    assert "\n\toptimizer.zero_grad()\n\tloss = " in fixed


async def test_crlf_documents(shared, uri_of):
    client = shared
    uri = uri_of("crlf.py")
    text = MISSING_ZERO_GRAD.replace("\n", "\r\n")
    open_document(client, uri, text)
    diagnostic = only((await published_for(client, uri, version=1)).diagnostics, "TD101")
    assert diagnostic.range == types.Range(types.Position(8, 4), types.Position(8, 19))
    assert diagnostic.data["fix"]["edits"][0]["newText"] == "    optimizer.zero_grad()\r\n"

    # the editor inserts the line the quick fix proposes, in an incremental change
    (fix, *_) = await actions_at(client, uri, diagnostic.range, only=["quickfix"])
    action = await resolved(client, fix)
    (edit,) = edits_of(action.edit, uri, version=1)
    change_document(
        client,
        uri,
        2,
        [types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text)],
    )
    fixed = apply_text_edits(text, [edit])
    assert "\n" not in fixed.replace("\r\n", "")  # the inserted line ends like the others
    published = await published_for(client, uri, version=2)
    assert codes(published.diagnostics) == engine_codes(fixed)
    assert "TD101" not in codes(published.diagnostics)
