"""Hovers: a finding's documentation page in the client's language, and pitfall notes on torch
APIs resolved through the file's own imports."""

from __future__ import annotations

import pytest
import pytest_asyncio
from lsprotocol import types

from .conftest import Sessions, open_document, published_for
from .samples import MISSING_ZERO_GRAD

pytestmark = pytest.mark.asyncio(loop_scope="module")

API_SAMPLE = """import numpy as np
import torch as T
import torch.nn.functional as F
from torch.utils.data import DataLoader as Loader


@T.no_grad()
def evaluate(model, batch):
    swapped = batch.transpose(0, 1)
    flat = model(swapped).view(-1)
    out = F.relu(flat, inplace=True)
    return out.item(), np.reshape(flat, (2, -1)), T.Tensor.view


def make_loader(dataset):
    return Loader(
        dataset,
        batch_size=32,
        num_workers=4,
        persistent_workers=True,
    )


def view(x):
    return x
"""
API_URI = "file:///project/api_sample.py"
TRAIN_URI = "file:///project/train.py"


def position_of(text: str, needle: str, offset: int = 0, occurrence: int = 0) -> types.Position:
    """The position of the `occurrence`-th `needle` in `text`, plus `offset` characters."""
    index = -1
    for _ in range(occurrence + 1):
        index = text.index(needle, index + 1)
    index += offset
    line = text.count("\n", 0, index)
    return types.Position(line, index - (text.rfind("\n", 0, index) + 1))


async def hover(client, uri: str, position: types.Position) -> types.Hover | None:
    return await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), position)
    )


async def _client_with_documents(sessions: Sessions, **options) -> object:
    client = await sessions.start(**options)
    open_document(client, API_URI, API_SAMPLE)
    open_document(client, TRAIN_URI, MISSING_ZERO_GRAD)
    await published_for(client, API_URI, version=1)
    await published_for(client, TRAIN_URI, version=1)
    return client


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def english():
    sessions = Sessions()
    try:
        yield await _client_with_documents(sessions, locale="en-US")
    finally:
        await sessions.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def chinese():
    sessions = Sessions()
    try:
        yield await _client_with_documents(sessions, locale="zh-cn")
    finally:
        await sessions.close()


async def test_hover_on_a_finding_shows_its_page(english):
    result = await hover(english, TRAIN_URI, position_of(MISSING_ZERO_GRAD, "backward", 2))
    assert result is not None
    assert result.contents.kind == types.MarkupKind.Markdown
    assert result.contents.value.startswith("# TD101 missing-zero-grad\n")
    assert "## Fix" in result.contents.value
    assert result.range == types.Range(types.Position(8, 4), types.Position(8, 19))


async def test_hover_on_a_finding_in_chinese_for_a_chinese_client(chinese):
    result = await hover(chinese, TRAIN_URI, position_of(MISSING_ZERO_GRAD, "loss.backward"))
    assert result is not None
    assert result.contents.value.startswith("# TD101 missing-zero-grad（缺少梯度清零）")


async def test_hover_outside_findings_and_torch_names_is_empty(english):
    assert await hover(english, TRAIN_URI, position_of(MISSING_ZERO_GRAD, "lr=0.1", 3)) is None
    assert await hover(english, TRAIN_URI, types.Position(5, 0)) is None  # a blank line


@pytest.mark.parametrize(
    ("needle", "offset", "occurrence", "title", "phrase"),
    [
        # a method on a receiver nobody can type without running the code
        (".view(-1)", 2, 0, "Tensor.view", "view size is not compatible"),
        ("transpose(0", 3, 0, "transpose", "non-contiguous"),
        ("out.item()", 5, 0, "Tensor.item", "device synchronisation"),
        # an attribute chain through an aliased import: `import torch as T`
        ("T.Tensor.view", 10, 0, "Tensor.view", "never copies"),
        # a function through an aliased module import
        ("F.relu", 3, 0, "torch.nn.functional.relu", "inplace=True"),
        # a decorator through the alias
        ("T.no_grad", 3, 0, "torch.no_grad", "model.eval()"),
        # a class imported under another name, and its keyword arguments
        ("Loader(", 2, 0, "torch.utils.data.DataLoader", "num_workers > 0"),
        ("num_workers=4", 3, 0, "DataLoader(num_workers=...)", "__main__"),
        ("persistent_workers", 5, 0, "DataLoader(persistent_workers=...)", "num_workers > 0"),
        # the name in the import statement itself
        ("DataLoader as", 2, 0, "torch.utils.data.DataLoader", "spawn"),
    ],
)
async def test_hover_on_torch_apis_shows_the_pitfall_note(
    english, needle, offset, occurrence, title, phrase
):
    result = await hover(english, API_URI, position_of(API_SAMPLE, needle, offset, occurrence))
    assert result is not None, f"no hover on {needle!r}"
    text = result.contents.value
    assert text.startswith(f"**{title}**"), text
    assert phrase in text


async def test_hover_range_is_the_name_under_the_cursor(english):
    result = await hover(english, API_URI, position_of(API_SAMPLE, ".view(-1)", 3))
    assert result is not None
    start = position_of(API_SAMPLE, ".view(-1)", 1)
    assert result.range == types.Range(start, types.Position(start.line, start.character + 4))


@pytest.mark.parametrize(
    "needle",
    [
        "np.reshape",  # numpy's reshape is not torch's: no note
        "def view",  # a local function that happens to be called view
        "batch_size=32",  # a DataLoader argument without a known pitfall
    ],
)
async def test_no_torch_note_for_names_that_are_not_torch(english, needle):
    offset = 4 if needle.startswith(("np.", "def")) else 1
    assert await hover(english, API_URI, position_of(API_SAMPLE, needle, offset)) is None


async def test_torch_notes_in_chinese(chinese):
    result = await hover(chinese, API_URI, position_of(API_SAMPLE, ".view(-1)", 2))
    assert result is not None
    assert "从不复制数据" in result.contents.value
    keyword = await hover(chinese, API_URI, position_of(API_SAMPLE, "num_workers=4", 2))
    assert keyword is not None
    assert "工作进程" in keyword.contents.value


async def test_chinese_client_links_to_the_chinese_page(chinese):
    published = chinese.published
    td101 = next(p for p in published if p.uri == TRAIN_URI).diagnostics[0]
    assert td101.code_description.href.endswith("/zh-CN/TD101.md")
