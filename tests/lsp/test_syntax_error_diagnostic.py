"""A syntax error in the editor: one TD000 diagnostic where the parser stopped, push or pull."""

from __future__ import annotations

import pytest
from lsprotocol import types

from .conftest import (
    open_document,
    published_for,
    pull,
    replace_all,
    shared_session,
    vscode_capabilities,
)
from .samples import MISSING_ZERO_GRAD

pytestmark = pytest.mark.asyncio(loop_scope="module")

shared = shared_session()
HALF_TYPED = "def f(:\n    return 1\n"


async def test_a_syntax_error_is_published_once_as_td000(shared, uri_of):
    client = shared
    uri = uri_of("typing.py")
    open_document(client, uri, HALF_TYPED)
    published = await published_for(client, uri, version=1)
    assert [(d.code, d.severity) for d in published.diagnostics] == [
        ("TD000", types.DiagnosticSeverity.Error)
    ]
    diagnostic = published.diagnostics[0]
    assert diagnostic.range == types.Range(types.Position(0, 6), types.Position(0, 7))
    assert diagnostic.message == "SyntaxError: invalid syntax"
    assert diagnostic.code_description is not None
    assert diagnostic.code_description.href.endswith("/en/TD000.md")


async def test_the_syntax_error_goes_when_the_code_parses(shared, uri_of):
    client = shared
    uri = uri_of("fixed_later.py")
    open_document(client, uri, MISSING_ZERO_GRAD + "\nfor epoch in range(3)\n    pass\n")
    first = await published_for(client, uri, version=1)
    assert sorted(str(d.code) for d in first.diagnostics).count("TD000") == 1
    replace_all(client, uri, 2, MISSING_ZERO_GRAD)
    second = await published_for(client, uri, version=2)
    assert "TD000" not in {d.code for d in second.diagnostics}
    assert "TD101" in {d.code for d in second.diagnostics}


async def test_a_pulling_client_gets_it_once_too(lsp, uri_of):
    client = await lsp.start(capabilities=vscode_capabilities(pull=True))
    uri = uri_of("pulled.py")
    open_document(client, uri, HALF_TYPED)
    report = await pull(client, uri)
    assert [d.code for d in report.items] == ["TD000"]
    assert len(client.published) == 0
