"""Settings from initializationOptions, workspace/configuration, didChangeConfiguration and
`[tool.torchdoctor]`, and what the user is told when they are wrong."""

from __future__ import annotations

import pytest
from lsprotocol import types

from ..test_torch_install import BARE_LOAD, make_old_torch_python
from .conftest import (
    codes,
    engine_codes,
    open_document,
    published_for,
    pull,
    set_settings,
    vscode_capabilities,
    wait_until,
)
from .samples import TRAINING_LOOPS

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_initialization_settings_select_and_severity(lsp, tmp_path):
    client = await lsp.start(
        settings={"select": ["TD10"], "ignore": ["TD102"], "severity": {"TD104": "hint"}}
    )
    uri = (tmp_path / "train.py").as_uri()
    open_document(client, uri, TRAINING_LOOPS)
    published = await published_for(client, uri, version=1)
    table = {"select": ["TD10"], "ignore": ["TD102"]}
    assert codes(published.diagnostics) == engine_codes(TRAINING_LOOPS, table)
    assert "TD102" not in codes(published.diagnostics)
    severities = {d.code: d.severity for d in published.diagnostics}
    assert severities["TD104"] == types.DiagnosticSeverity.Hint
    assert severities["TD101"] == types.DiagnosticSeverity.Warning


async def test_workspace_configuration_is_pulled_after_initialized(lsp, tmp_path):
    client = await lsp.start(configuration={"ignore": ["TD104"], "severity": {"TD101": "info"}})
    uri = (tmp_path / "train.py").as_uri()
    # the server has had `initialized` and asked for the editor's settings; the answer goes
    # out before the document opens (waiting for the registration alone raced with it)
    await wait_until(lambda: client.configurations_answered)
    open_document(client, uri, TRAINING_LOOPS)
    published = await published_for(client, uri, version=1)
    assert codes(published.diagnostics) == engine_codes(TRAINING_LOOPS, {"ignore": ["TD104"]})
    assert "TD104" not in codes(published.diagnostics)
    td101 = next(d for d in published.diagnostics if d.code == "TD101")
    assert td101.severity == types.DiagnosticSeverity.Information


async def test_changed_configuration_applies_to_open_documents(lsp, tmp_path):
    client = await lsp.start()
    uri = (tmp_path / "train.py").as_uri()
    open_document(client, uri, TRAINING_LOOPS)
    first = await published_for(client, uri, version=1)
    assert "TD101" in codes(first.diagnostics)

    count = len(client.published)
    set_settings(client, {"ignore": ["TD101"]})
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    again = await published_for(client, uri, version=1, after=count)
    assert codes(again.diagnostics) == engine_codes(TRAINING_LOOPS, {"ignore": ["TD101"]})
    assert "TD101" not in codes(again.diagnostics)

    # turning torchdoctor off clears what it showed, and hovers stop
    count = len(client.published)
    set_settings(client, {"enable": False})
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    cleared = await published_for(client, uri, after=count)
    assert len(cleared.diagnostics) == 0
    hover = await client.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(9, 10))
    )
    assert hover is None


async def test_pull_clients_are_asked_to_refresh_after_a_settings_change(lsp, tmp_path):
    client = await lsp.start(capabilities=vscode_capabilities(pull=True))
    uri = (tmp_path / "train.py").as_uri()
    open_document(client, uri, TRAINING_LOOPS)
    before = await pull(client, uri)
    set_settings(client, {"select": ["TD104"]})
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await wait_until(lambda: client.diagnostic_refresh_count > 0)
    after = await pull(client, uri, previous=before.result_id)
    assert after.kind == "full"
    assert codes(after.items) == ["TD104", "TD104"]  # select: nothing else can appear


async def test_settings_pushed_by_clients_without_configuration_requests(lsp, tmp_path):
    capabilities = vscode_capabilities()
    capabilities.workspace.configuration = False
    client = await lsp.start(capabilities=capabilities)
    uri = (tmp_path / "train.py").as_uri()
    open_document(client, uri, TRAINING_LOOPS)
    await published_for(client, uri, version=1)
    count = len(client.published)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"torchdoctor": {"select": ["TD102"]}})
    )
    again = await published_for(client, uri, after=count)
    assert codes(again.diagnostics) == ["TD102"]


async def test_bad_settings_fall_back_to_defaults_and_say_what_was_wrong(lsp, tmp_path):
    client = await lsp.start(
        settings={
            "select": ["TD9999"],
            "severity": {"TD101": "fatal"},
            "locale": "fr",
            "codeLens": "yes",
            "probe": {"iters": 0, "device": "tpu"},
            "colour": "blue",
        }
    )
    message = await wait_until(lambda: client.messages)
    text = message[0].message
    assert message[0].type == types.MessageType.Warning
    for fragment in ("TD9999", "fatal", "fr", "codeLens", "probe.iters", "probe.device", "colour"):
        assert fragment in text, fragment
    uri = (tmp_path / "train.py").as_uri()
    open_document(client, uri, TRAINING_LOOPS)
    published = await published_for(client, uri, version=1)
    # the defaults: every rule on, warnings stay warnings
    assert codes(published.diagnostics) == engine_codes(TRAINING_LOOPS)
    assert {d.severity for d in published.diagnostics if str(d.code).startswith("TD10")} == {
        types.DiagnosticSeverity.Warning
    }


async def test_pyproject_is_read_and_editor_settings_win(lsp, tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchdoctor]\nignore = ["TD102"]\nseverity = { TD101 = "error", TD104 = "hint" }\n'
    )
    client = await lsp.start(root=tmp_path, settings={"severity": {"TD101": "information"}})
    uri = (tmp_path / "src" / "train.py").as_uri()
    open_document(client, uri, TRAINING_LOOPS)
    published = await published_for(client, uri, version=1)
    assert codes(published.diagnostics) == engine_codes(TRAINING_LOOPS, {"ignore": ["TD102"]})
    assert "TD102" not in codes(published.diagnostics)  # the file's ignore
    severities = {d.code: d.severity for d in published.diagnostics}
    assert severities["TD104"] == types.DiagnosticSeverity.Hint  # the file's severity
    assert severities["TD101"] == types.DiagnosticSeverity.Information  # the editor's wins


async def test_pyproject_changes_apply_when_the_client_reports_them(lsp, tmp_path):
    client = await lsp.start(root=tmp_path)
    watched = await wait_until(
        lambda: [r for r in client.registrations if r.method == "workspace/didChangeWatchedFiles"]
    )
    assert watched
    uri = (tmp_path / "train.py").as_uri()
    open_document(client, uri, TRAINING_LOOPS)
    assert "TD104" in codes((await published_for(client, uri, version=1)).diagnostics)

    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.torchdoctor]\nignore = ["TD104"]\n')
    count = len(client.published)
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            [types.FileEvent(pyproject.as_uri(), types.FileChangeType.Created)]
        )
    )
    again = await published_for(client, uri, after=count)
    assert codes(again.diagnostics) == engine_codes(TRAINING_LOOPS, {"ignore": ["TD104"]})
    assert "TD104" not in codes(again.diagnostics)


async def test_a_bad_pyproject_entry_is_reported_and_the_rest_applies(lsp, tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchdoctor]\nignore = ["TD104"]\nselekt = ["TD101"]\n'
    )
    client = await lsp.start(root=tmp_path)
    uri = (tmp_path / "train.py").as_uri()
    open_document(client, uri, TRAINING_LOOPS)
    published = await published_for(client, uri, version=1)
    assert codes(published.diagnostics) == engine_codes(TRAINING_LOOPS, {"ignore": ["TD104"]})
    message = await wait_until(lambda: client.messages)
    assert "selekt" in message[0].message and "pyproject.toml" in message[0].message


async def test_version_dependent_rules_follow_the_interpreters_torch(lsp, tmp_path):
    """A bare torch.load is unsafe before torch 2.6: reported for an interpreter with torch 2.4,
    quiet for the server's own (2.13), and `target-torch` in pyproject.toml wins over both."""
    old_python = make_old_torch_python(tmp_path / "env")
    client = await lsp.start(settings={"interpreter": old_python, "hoverSignatures": False})
    uri = (tmp_path / "load.py").as_uri()
    open_document(client, uri, BARE_LOAD)
    assert codes((await published_for(client, uri, version=1)).diagnostics) == ["TD702"]

    current = await lsp.start(settings={"hoverSignatures": False})
    open_document(current, uri, BARE_LOAD)
    assert codes((await published_for(current, uri, version=1)).diagnostics) == []

    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.torchdoctor]\ntarget-torch = "2.13"\n')
    pinned = (project / "load.py").as_uri()
    open_document(client, pinned, BARE_LOAD)
    assert codes((await published_for(client, pinned, version=1)).diagnostics) == []
