"""Diagnostics over a real stdio connection: push, pull, rapid edits, close, syntax errors."""

from __future__ import annotations

import random

import pytest
from lsprotocol import types

from .conftest import (
    change_document,
    codes,
    engine_codes,
    only,
    open_document,
    published_for,
    pull,
    replace_all,
    shared_session,
    vscode_capabilities,
    wait_until,
)
from .samples import BACKWARD_TWICE, CLEAN, MISSING_ZERO_GRAD, TRAINING_LOOPS

pytestmark = pytest.mark.asyncio(loop_scope="module")

shared = shared_session()


async def test_push_diagnostics_carry_code_link_source_and_fix(shared, uri_of):
    client = shared
    uri = uri_of("train.py")
    open_document(client, uri, TRAINING_LOOPS)
    published = await published_for(client, uri, version=1)

    assert codes(published.diagnostics) == engine_codes(TRAINING_LOOPS)
    assert {"TD101", "TD102", "TD104"} <= set(codes(published.diagnostics))
    td101 = next(d for d in published.diagnostics if d.code == "TD101")
    assert td101.range == types.Range(types.Position(9, 4), types.Position(9, 19))
    assert td101.source == "torchdoctor"
    assert td101.severity == types.DiagnosticSeverity.Warning
    assert td101.code_description is not None
    assert td101.code_description.href.startswith("file:")
    assert td101.code_description.href.endswith("/en/TD101.md")
    assert "zero_grad" in td101.message
    fix = td101.data["fix"]
    assert fix["title"].startswith("Insert `optimizer.zero_grad()`")
    assert fix["edits"] == [
        {
            "range": {"start": {"line": 8, "character": 0}, "end": {"line": 8, "character": 0}},
            "newText": "    optimizer.zero_grad()\n",
        }
    ]
    assert not td101.tags


async def test_error_severity_for_backward_twice(shared, uri_of):
    client = shared
    uri = uri_of("aux.py")
    open_document(client, uri, BACKWARD_TWICE)
    published = await published_for(client, uri, version=1)
    td103 = only(published.diagnostics, "TD103")
    assert td103.code == "TD103"
    assert td103.severity == types.DiagnosticSeverity.Error


async def test_pull_client_gets_reports_and_no_pushes(lsp, uri_of):
    client = await lsp.start(capabilities=vscode_capabilities(pull=True))
    uri = uri_of("train.py")
    open_document(client, uri, TRAINING_LOOPS)

    first = await pull(client, uri)
    assert first.kind == "full"
    assert codes(first.items) == engine_codes(TRAINING_LOOPS)
    assert "TD101" in codes(first.items)
    assert first.result_id

    again = await pull(client, uri, previous=first.result_id)
    assert again.kind == "unchanged"
    assert again.result_id == first.result_id

    replace_all(client, uri, 2, CLEAN)
    after_edit = await pull(client, uri, previous=first.result_id)
    assert after_edit.kind == "full"
    assert codes(after_edit.items) == engine_codes(CLEAN)
    assert "TD101" not in codes(after_edit.items)
    assert after_edit.result_id != first.result_id

    # a pulling client must never also get pushed diagnostics (it would show them twice)
    await pull(client, uri)
    assert len(client.published) == 0


async def test_rapid_incremental_edits_never_publish_a_stale_version(shared, uri_of):
    """Type a training loop character by character, then delete parts of it, as fast as the
    client can send: every published version must match the text of that version, and the last
    one must be the final text's."""
    client = shared
    uri = uri_of("typing.py")
    texts = {1: ""}
    open_document(client, uri, "")
    text = ""
    version = 1
    target = MISSING_ZERO_GRAD
    rng = random.Random(3)
    # insert the target text in random-sized chunks at the end, one edit per chunk
    position = 0
    while position < len(target):
        chunk = target[position : position + rng.randint(1, 6)]
        line = text.count("\n")
        col = len(text) - (text.rfind("\n") + 1)
        version += 1
        change_document(
            client,
            uri,
            version,
            [
                types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(line, col), types.Position(line, col)),
                    text=chunk,
                )
            ],
        )
        text += chunk
        texts[version] = text
        position += len(chunk)
    # then delete the zero-grad-free loop's backward line and put it back
    lines = text.split("\n")
    backward_line = next(i for i, line in enumerate(lines) if "backward" in line)
    version += 1
    change_document(
        client,
        uri,
        version,
        [
            types.TextDocumentContentChangePartial(
                range=types.Range(
                    types.Position(backward_line, 0), types.Position(backward_line + 1, 0)
                ),
                text="",
            )
        ],
    )
    del lines[backward_line]
    text = "\n".join(lines)
    texts[version] = text
    final_version = version

    final = await published_for(client, uri, version=final_version)
    assert codes(final.diagnostics) == codes_of(text)

    versions = [p.version for p in client.published if p.uri == uri]
    assert versions == sorted(versions), "a newer version was published before an older one"
    for params in client.published:
        if params.uri != uri:
            continue  # the server is shared with other tests
        expected = codes_of(texts[params.version])
        assert codes(params.diagnostics) == expected, f"version {params.version} is stale"
    # edits that arrive during an analysis are coalesced: far fewer runs than edits
    assert len(versions) < final_version


def codes_of(text: str) -> list[str]:
    return engine_codes(text, path="typing.py")


async def test_diagnostics_follow_edits_and_clear_on_close(shared, uri_of):
    client = shared
    uri = uri_of("loop.py")
    open_document(client, uri, MISSING_ZERO_GRAD)
    first = await published_for(client, uri, version=1)
    assert "TD101" in codes(first.diagnostics)

    # insert the missing zero_grad() as the first statement of the loop body
    change_document(
        client,
        uri,
        2,
        [
            types.TextDocumentContentChangePartial(
                range=types.Range(types.Position(7, 0), types.Position(7, 0)),
                text="    optimizer.zero_grad()\n",
            )
        ],
    )
    fixed = MISSING_ZERO_GRAD.replace("    loss =", "    optimizer.zero_grad()\n    loss =", 1)
    second = await published_for(client, uri, version=2)
    assert codes(second.diagnostics) == engine_codes(fixed)
    assert "TD101" not in codes(second.diagnostics)

    count = len(client.published)
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri))
    )
    cleared = await published_for(client, uri, after=count)
    assert len(cleared.diagnostics) == 0


async def test_save_reanalyses_with_the_current_text(shared, uri_of):
    client = shared
    uri = uri_of("saved.py")
    open_document(client, uri, MISSING_ZERO_GRAD)
    await published_for(client, uri, version=1)
    count = len(client.published)
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri))
    )
    again = await published_for(client, uri, after=count)
    assert again.version == 1
    assert codes(again.diagnostics) == engine_codes(MISSING_ZERO_GRAD)


async def test_half_typed_code_still_gets_diagnostics_where_it_parses(shared, uri_of):
    client = shared
    uri = uri_of("broken.py")
    broken = MISSING_ZERO_GRAD + "\ndef evaluate(model, loader:\n    for x in loader\n"
    open_document(client, uri, broken)
    published = await published_for(client, uri, version=1)
    td101 = only(published.diagnostics, "TD101")
    assert td101.code == "TD101"
    assert td101.range.start == types.Position(8, 4)


async def test_many_documents_open_and_close(shared, uri_of):
    client = shared
    uris = [uri_of(f"script_{n}.py") for n in range(30)]
    for n, uri in enumerate(uris):
        open_document(client, uri, MISSING_ZERO_GRAD if n % 2 == 0 else CLEAN)
    for n, uri in enumerate(uris):
        published = await published_for(client, uri, version=1)
        expected = engine_codes(MISSING_ZERO_GRAD if n % 2 == 0 else CLEAN)
        assert codes(published.diagnostics) == expected
    count = len(client.published)
    for uri in uris:
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri))
        )
    await wait_until(lambda: len(client.published) - count >= len(uris))
    closing = client.published[count:]
    assert {p.uri for p in closing} == set(uris)
    assert all(len(p.diagnostics) == 0 for p in closing)
    # a closed document is forgotten: pulling it answers with nothing rather than hanging
    report = await pull(client, uris[0])
    assert len(report.items) == 0
