"""Jupyter notebooks over LSP 3.17 notebook sync: diagnostics, hovers, quick fixes, fix-all and
noqa in cells, the cells analysed together, and cells edited, added, moved and removed."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from lsprotocol import types
from pytest_lsp import ClientServerConfig

from .conftest import SERVER_COMMAND, WAIT, Client, make_client, vscode_capabilities, wait_until

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

NOTEBOOK = "file:///tmp/notebook-tests/train.ipynb"
SETUP = (
    "import torch\n"
    "from torch import nn\n"
    "model = nn.Linear(3, 1)\n"
    "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
)
TRAIN = (
    "%%time\n"
    "for step in range(10):\n"
    "    loss = model(torch.randn(4, 3)).sum()\n"
    "    loss.backward()\n"
    "    optimizer.step()\n"
)
LOAD = 'state = torch.load("w.pt", weights_only=False)\n'


def cell_uri(name: str) -> str:
    return f"vscode-notebook-cell:/tmp/notebook-tests/train.ipynb#{name}"


def notebook_capabilities(pull: bool = False) -> types.ClientCapabilities:
    capabilities = vscode_capabilities(pull=pull)
    capabilities.notebook_document = types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities()
    )
    return capabilities


async def start(pull: bool = False) -> tuple[Client, types.InitializeResult]:
    env = {**os.environ, "TORCHDOCTOR_LOG_LEVEL": "WARNING"}
    config = ClientServerConfig(
        server_command=SERVER_COMMAND, client_factory=make_client, server_env=env
    )
    client = await config.start()
    assert isinstance(client, Client)
    result = await client.initialize_session(
        types.InitializeParams(
            capabilities=notebook_capabilities(pull),
            initialization_options={"settings": {"hoverSignatures": False}},
        )
    )
    return client, result


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def session() -> AsyncIterator[tuple[Client, types.InitializeResult]]:
    client, result = await start()
    try:
        yield client, result
    finally:
        await client.shutdown_session()
        await client.stop()


def open_notebook(client: Client, uri: str, cells: list[tuple[str, str, str]]) -> None:
    """cells: (cell name, language or "markdown", text)."""
    notebook_cells = [
        types.NotebookCell(
            kind=types.NotebookCellKind.Markup
            if language == "markdown"
            else types.NotebookCellKind.Code,
            document=cell_uri(name),
        )
        for name, language, _ in cells
    ]
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=uri, notebook_type="jupyter-notebook", version=1, cells=notebook_cells
            ),
            cell_text_documents=[
                types.TextDocumentItem(cell_uri(name), language, 1, text)
                for name, language, text in cells
            ],
        )
    )


async def diagnostics_of(client: Client, uri: str, after: int = 0) -> list[types.Diagnostic]:
    def find() -> types.PublishDiagnosticsParams | None:
        found = [p for p in client.published[after:] if p.uri == uri]
        return found[-1] if found else None

    return list((await wait_until(find, WAIT)).diagnostics)


STANDARD = [
    ("setup", "python", SETUP),
    ("notes", "markdown", "# Training\nThe loop below."),
    ("train", "python", TRAIN),
    ("load", "python", LOAD),
]


async def test_the_server_announces_notebook_sync_for_jupyter(session) -> None:
    _, result = session
    sync = result.capabilities.notebook_document_sync
    assert sync is not None
    selector = sync.notebook_selector[0]
    assert selector.notebook == "jupyter-notebook"
    assert [cell.language for cell in selector.cells] == ["python"]


async def test_a_loop_in_one_cell_is_checked_with_the_optimizer_of_another(session) -> None:
    client, _ = session
    open_notebook(client, NOTEBOOK, STANDARD)
    train = await diagnostics_of(client, cell_uri("train"))
    assert [(str(d.code), d.range.start.line) for d in train] == [("TD101", 3)]
    # the `%%time` magic line is no syntax error; the setup cell has nothing to say
    assert await diagnostics_of(client, cell_uri("setup")) == []
    assert [str(d.code) for d in await diagnostics_of(client, cell_uri("load"))] == ["TD702"]


async def test_hover_on_a_cell_finding_shows_its_rule(session) -> None:
    client, _ = session
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(cell_uri("train")), types.Position(3, 6))
    )
    assert hover is not None and "TD101" in hover.contents.value
    assert hover.range is not None and hover.range.start.line == 3


async def actions_for(client: Client, uri: str, line: int, only=None) -> list[types.CodeAction]:
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(uri),
            types.Range(types.Position(line, 4), types.Position(line, 5)),
            types.CodeActionContext(diagnostics=[], only=only),
        )
    )
    resolved = []
    for action in actions or []:
        if action.edit is None:
            action = await client.code_action_resolve_async(action)
        resolved.append(action)
    return resolved


def cell_edits(action: types.CodeAction) -> dict[str, list[types.TextEdit]]:
    edit = action.edit
    assert edit is not None
    if edit.document_changes is not None:
        return {change.text_document.uri: list(change.edits) for change in edit.document_changes}
    return {uri: list(edits) for uri, edits in (edit.changes or {}).items()}


async def test_the_quick_fix_edits_the_cell_in_its_own_lines(session) -> None:
    client, _ = session
    actions = await actions_for(client, cell_uri("train"), 3)
    fix = next(a for a in actions if "zero_grad" in a.title)
    edits = cell_edits(fix)
    assert list(edits) == [cell_uri("train")]
    (edit,) = edits[cell_uri("train")]
    assert edit.range.start == types.Position(2, 0) and edit.range.end == types.Position(2, 0)
    assert edit.new_text == "    optimizer.zero_grad()\n"


async def test_ignore_on_this_line_writes_noqa_into_the_cell(session) -> None:
    client, _ = session
    actions = await actions_for(client, cell_uri("train"), 3)
    ignore = next(a for a in actions if a.title == "Ignore TD101 on this line")
    (edit,) = cell_edits(ignore)[cell_uri("train")]
    assert edit.range.start.line == 3 and "# noqa: TD101" in edit.new_text


async def test_fix_all_fixes_each_cell_separately(session) -> None:
    client, _ = session
    actions = await actions_for(client, cell_uri("setup"), 0, only=["source.fixAll.torchdoctor"])
    (fix_all,) = actions
    edits = cell_edits(fix_all)
    # the unsafe torch.load fix (it changes behaviour) is left to the user; the loop is fixed
    assert list(edits) == [cell_uri("train")]
    (edit,) = edits[cell_uri("train")]
    assert "optimizer.zero_grad()" in edit.new_text and edit.range.start.line >= 1


async def test_the_fix_all_command_from_a_cell_fixes_the_notebook(session) -> None:
    client, _ = session
    before = len(client.applied_edits)
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="torchdoctor.server.fixAll", arguments=[cell_uri("setup")]
        )
    )
    assert answer["applied"] is True
    (applied,) = client.applied_edits[before:]
    edit = applied.edit
    changed = (
        [change.text_document.uri for change in edit.document_changes]
        if edit.document_changes
        else list(edit.changes or {})
    )
    assert changed == [cell_uri("train")]


async def test_an_edit_in_a_cell_updates_that_cells_diagnostics(session) -> None:
    client, _ = session
    after = len(client.published)
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(2, NOTEBOOK),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    text_content=[
                        types.NotebookDocumentCellContentChanges(
                            document=types.VersionedTextDocumentIdentifier(2, cell_uri("train")),
                            changes=[
                                types.TextDocumentContentChangePartial(
                                    range=types.Range(types.Position(2, 0), types.Position(2, 0)),
                                    text="    optimizer.zero_grad()\n",
                                )
                            ],
                        )
                    ]
                )
            ),
        )
    )
    assert await diagnostics_of(client, cell_uri("train"), after) == []


async def test_cells_added_moved_and_removed(session) -> None:
    client, _ = session
    after = len(client.published)
    # remove the torch.load cell (index 3) and add a cell calling a removed function
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(3, NOTEBOOK),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    structure=types.NotebookDocumentCellChangeStructure(
                        array=types.NotebookCellArrayChange(
                            start=3,
                            delete_count=1,
                            cells=[
                                types.NotebookCell(
                                    kind=types.NotebookCellKind.Code, document=cell_uri("new")
                                )
                            ],
                        ),
                        did_open=[
                            types.TextDocumentItem(
                                cell_uri("new"), "python", 1, "x = torch.solve(a, b)\n"
                            )
                        ],
                        did_close=[types.TextDocumentIdentifier(cell_uri("load"))],
                    )
                )
            ),
        )
    )
    new = await diagnostics_of(client, cell_uri("new"), after)
    assert [(str(d.code), d.range.start.line) for d in new] == [("TD707", 0)]
    assert await diagnostics_of(client, cell_uri("load"), after) == []  # cleared when removed
    # move the new cell to the top: it now runs before `import torch`, and is still found
    after = len(client.published)
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(4, NOTEBOOK),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    structure=types.NotebookDocumentCellChangeStructure(
                        array=types.NotebookCellArrayChange(
                            start=0,
                            delete_count=4,
                            cells=[
                                types.NotebookCell(kind=kind, document=cell_uri(name))
                                for name, kind in [
                                    ("new", types.NotebookCellKind.Code),
                                    ("setup", types.NotebookCellKind.Code),
                                    ("notes", types.NotebookCellKind.Markup),
                                    ("train", types.NotebookCellKind.Code),
                                ]
                            ],
                        )
                    )
                )
            ),
        )
    )
    await wait_until(lambda: any(p.uri == cell_uri("setup") for p in client.published[after:]))
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(cell_uri("new")), types.Position(0, 6))
    )
    assert hover is not None and "TD707" in hover.contents.value


async def test_closing_the_notebook_clears_its_cells(session) -> None:
    client, _ = session
    after = len(client.published)
    client.notebook_document_did_close(
        types.DidCloseNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(NOTEBOOK),
            cell_text_documents=[
                types.TextDocumentIdentifier(cell_uri(n)) for n in ("new", "setup", "train")
            ],
        )
    )
    assert await diagnostics_of(client, cell_uri("new"), after) == []


async def test_a_pulling_client_gets_each_cells_own_diagnostics() -> None:
    client, _ = await start(pull=True)
    try:
        open_notebook(client, NOTEBOOK, STANDARD)
        reports = {}
        for name in ("setup", "train", "load"):
            reports[name] = await client.text_document_diagnostic_async(
                types.DocumentDiagnosticParams(types.TextDocumentIdentifier(cell_uri(name)))
            )
        found = {
            name: [(str(d.code), d.range.start.line) for d in r.items]
            for name, r in reports.items()
        }
        assert found == {"setup": [], "train": [("TD101", 3)], "load": [("TD702", 0)]}
        assert client.published == []  # a pulling client is not pushed to
    finally:
        await client.shutdown_session()
        await client.stop()
