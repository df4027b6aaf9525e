"""Huge documents: past `maxDocumentSize` the server does not analyse them and says so once;
below it, large documents are analysed in a lane of their own, so a request about another
document is answered while their analyses are still running."""

from __future__ import annotations

import pytest
from lsprotocol import types
from torchdoctor.lsp.settings import MAX_DOCUMENT_SIZE, parse_settings

from .conftest import (
    codes,
    open_document,
    published_for,
    pull,
    replace_all,
    vscode_capabilities,
    wait_until,
)
from .samples import MISSING_ZERO_GRAD
from .test_hover import API_SAMPLE, hover, position_of

in_module_loop = pytest.mark.asyncio(loop_scope="module")

# a training function with a TD101 pitfall (no zero_grad): every copy is a finding when analysed
TRAINING_FUNCTION = """
def train_{n}(model, loader, optimizer):
    for x, y in loader:
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        optimizer.step()
"""


def training_file(size: int) -> str:
    parts = ["import torch\n"]
    total, n = 0, 0
    while total < size:
        part = TRAINING_FUNCTION.format(n=n)
        parts.append(part)
        total += len(part)
        n += 1
    return "".join(parts)


def size_messages(client) -> list[str]:
    return [m.message for m in client.messages if "maxDocumentSize" in m.message]


@in_module_loop
async def test_a_5_mb_document_is_not_analysed_and_the_user_is_told_once(lsp, uri_of):
    client = await lsp.start()
    big, small = uri_of("generated.py"), uri_of("train.py")
    text = training_file(5 * 1024 * 1024)
    assert len(text.encode()) > MAX_DOCUMENT_SIZE
    open_document(client, big, text)
    cleared = await published_for(client, big, version=1)
    assert list(cleared.diagnostics) == []  # thousands of TD101 in it, none reported: no analysis
    messages = await wait_until(lambda: size_messages(client))
    assert "generated.py" in messages[0] and "5 MiB" in messages[0], messages

    # the rest of the server carries on, and typing in the big file brings no new message
    open_document(client, small, MISSING_ZERO_GRAD)
    assert "TD101" in codes((await published_for(client, small, version=1)).diagnostics)
    for version in (2, 3):
        edit = types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(0, 0), types.Position(0, 0)), text="#"
        )
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=big, version=version), [edit]
            )
        )
    assert await hover(client, big, types.Position(1, 1)) is None
    assert len(size_messages(client)) == 1
    assert all(list(p.diagnostics) == [] for p in client.published if p.uri == big)

    # cut down below the limit it is analysed; grown past it again, the user is told again
    replace_all(client, big, 4, training_file(2000))
    assert "TD101" in codes((await published_for(client, big, version=4)).diagnostics)
    replace_all(client, big, 5, text)
    assert list((await published_for(client, big, version=5)).diagnostics) == []
    await wait_until(lambda: len(size_messages(client)) == 2)


@in_module_loop
async def test_the_limit_is_a_setting(lsp, uri_of):
    # VS Code pulls diagnostics: the report is empty, and asking twice brings one message
    client = await lsp.start(
        capabilities=vscode_capabilities(pull=True), settings={"maxDocumentSize": 1000}
    )
    uri = uri_of("train.py")
    text = MISSING_ZERO_GRAD + "\n" * (1001 - len(MISSING_ZERO_GRAD))
    open_document(client, uri, text)
    for _ in range(2):
        assert list((await pull(client, uri)).items) == []
    assert len(await wait_until(lambda: size_messages(client))) == 1
    assert client.published == []

    unlimited = await lsp.start(settings={"maxDocumentSize": 0})  # 0: no limit
    open_document(unlimited, uri, text)
    assert "TD101" in codes((await published_for(unlimited, uri, version=1)).diagnostics)
    assert size_messages(unlimited) == []


def test_a_bad_limit_falls_back_to_the_default_and_says_why():
    for bad in (-1, "2MB", 1.5, True):
        parsed = parse_settings({"maxDocumentSize": bad})
        assert parsed.settings.max_document_size == MAX_DOCUMENT_SIZE
        assert any("maxDocumentSize" in problem for problem in parsed.problems), parsed


@in_module_loop
async def test_another_document_is_served_while_two_large_ones_are_analysed(lsp, uri_of):
    """Both large documents are still being analysed (neither has diagnostics yet) when the
    hover on the small one is answered, with the analysis of the small one behind it."""
    client = await lsp.start()
    first, second, small = uri_of("big_1.py"), uri_of("big_2.py"), uri_of("api.py")
    text = training_file(600 * 1024)
    open_document(client, first, text)
    open_document(client, second, text)
    open_document(client, small, API_SAMPLE)
    answer = await hover(client, small, position_of(API_SAMPLE, ".view(-1)", 2))
    published_so_far = {p.uri for p in client.published}
    assert answer is not None and "view" in answer.contents.value
    assert first not in published_so_far and second not in published_so_far
    for uri in (first, second):
        published = await published_for(client, uri, version=1)
        assert codes(published.diagnostics).count("TD101") == text.count("def train_")
