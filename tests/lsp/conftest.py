"""End-to-end harness: a real `torchdoctor serve` process over stdio, driven by pytest-lsp's
client, with the client capabilities of a real editor."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features
from torchdoctor.analysis import check
from torchdoctor.analysis.config import config_from_mapping

ROOT = Path(__file__).resolve().parents[2]
SERVER_COMMAND = [sys.executable, "-m", "torchdoctor", "serve"]
WAIT = 20.0  # seconds any single expected server message may take on a loaded CI machine


class Client(LanguageClient):
    """pytest-lsp's client that also keeps every publishDiagnostics in order (the stock one
    keeps only the last per document) and answers the requests our server sends."""

    published: list[types.PublishDiagnosticsParams]
    applied_edits: list[types.ApplyWorkspaceEditParams]
    registrations: list[types.Registration]
    code_lens_refreshes: int
    configurations_answered: int  # workspace/configuration requests answered so far


def _record_publish(client: Client, params: types.PublishDiagnosticsParams) -> None:
    client.diagnostics[params.uri] = params.diagnostics
    client.published.append(params)


def _apply_edit(
    client: Client, params: types.ApplyWorkspaceEditParams
) -> types.ApplyWorkspaceEditResult:
    client.applied_edits.append(params)
    return types.ApplyWorkspaceEditResult(applied=True)


def _register_capability(client: Client, params: types.RegistrationParams) -> None:
    client.registrations.extend(params.registrations)


def _answer_configuration(client: Client, params: types.ConfigurationParams) -> list[Any]:
    answer = [
        client.get_configuration(section=item.section, scope_uri=item.scope_uri)
        for item in params.items
    ]
    client.configurations_answered += 1
    return answer


def _code_lens_refresh(client: Client, params: None) -> None:
    client.code_lens_refreshes += 1


def make_client() -> Client:
    client = Client(converter_factory=default_converter)
    client.published = []
    client.applied_edits = []
    client.registrations = []
    client.code_lens_refreshes = 0
    client.configurations_answered = 0
    features = dict(DEFAULT_CLIENT_FEATURES)
    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = _record_publish
    features[types.WORKSPACE_APPLY_EDIT] = _apply_edit
    features[types.CLIENT_REGISTER_CAPABILITY] = _register_capability
    features[types.WORKSPACE_CONFIGURATION] = _answer_configuration
    features[types.WORKSPACE_CODE_LENS_REFRESH] = _code_lens_refresh
    register_lsp_features(client, features)
    return client


def vscode_capabilities(
    *, pull: bool = False, lazy_actions: bool = True
) -> types.ClientCapabilities:
    """VS Code's capabilities (pytest-lsp's snapshot); `pull` adds pull diagnostics, which the
    snapshot predates, and `lazy_actions=False` makes a client that cannot resolve edits."""
    capabilities = client_capabilities("visual-studio-code")
    assert capabilities.text_document is not None and capabilities.workspace is not None
    if pull:
        capabilities.text_document.diagnostic = types.DiagnosticClientCapabilities(
            dynamic_registration=False, related_document_support=False
        )
        capabilities.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(
            refresh_support=True
        )
    if not lazy_actions and capabilities.text_document.code_action is not None:
        capabilities.text_document.code_action.resolve_support = None
    return capabilities


class Sessions:
    """Starts servers for a test and shuts every one of them down afterwards."""

    def __init__(self) -> None:
        self.clients: list[Client] = []

    async def start(
        self,
        *,
        capabilities: types.ClientCapabilities | None = None,
        settings: dict[str, Any] | None = None,
        configuration: dict[str, Any] | None = None,
        locale: str | None = None,
        root: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> Client:
        server_env = {**os.environ, "TORCHDOCTOR_LOG_LEVEL": "WARNING", **(env or {})}
        config = ClientServerConfig(
            server_command=SERVER_COMMAND, client_factory=make_client, server_env=server_env
        )
        client = await config.start()
        assert isinstance(client, Client)
        self.clients.append(client)
        if configuration is not None:
            set_settings(client, configuration)
        root_uri = root.as_uri() if root is not None else None
        options: dict[str, Any] = {"settings": {"hoverSignatures": False, **(settings or {})}}
        await client.initialize_session(
            types.InitializeParams(
                capabilities=capabilities or vscode_capabilities(),
                locale=locale,
                root_uri=root_uri,
                workspace_folders=[types.WorkspaceFolder(root_uri, root.name)]
                if root is not None and root_uri is not None
                else None,
                initialization_options=options,
            )
        )
        return client

    async def close(self) -> None:
        for client in self.clients:
            try:
                alive = client._server is not None and client._server.returncode is None
                if alive and not client.stopped:
                    await asyncio.wait_for(client.shutdown_session(), WAIT)
            finally:
                if client._server is not None and client._server.returncode is None:
                    client._server.kill()
                await client.stop()


# Every LSP test module runs its tests in one event loop (pytestmark in each module), so that a
# server can be shared by the tests of a module; without that a shared client hangs.
@pytest_asyncio.fixture(loop_scope="module")
async def lsp() -> AsyncIterator[Sessions]:
    sessions = Sessions()
    try:
        yield sessions
    finally:
        await sessions.close()


def shared_session(**options: Any) -> Any:
    """A module-scoped fixture: one server for the tests of a module that each open their own
    documents and change no settings (starting a server costs about a second of CPU)."""

    @pytest_asyncio.fixture(scope="module", loop_scope="module")
    async def session() -> AsyncIterator[Client]:
        sessions = Sessions()
        try:
            yield await sessions.start(**options)
        finally:
            await sessions.close()

    return session


# ---- helpers shared by the tests
def set_settings(client: Client, settings: dict[str, Any]) -> None:
    """What the client answers to workspace/configuration for `torchdoctor` from now on. An
    editor's answer replaces the initialization settings, so jedi's hover signatures (seconds
    of CPU to load torch) are turned off here too unless a test asks for them."""
    client.set_configuration({"hoverSignatures": False, **settings}, section="torchdoctor")


def open_document(
    client: Client, uri: str, text: str, version: int = 1, language: str = "python"
) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, language, version, text))
    )


def change_document(
    client: Client,
    uri: str,
    version: int,
    changes: list[types.TextDocumentContentChangeEvent],
) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=version), changes
        )
    )


def replace_all(client: Client, uri: str, version: int, text: str) -> None:
    change_document(client, uri, version, [types.TextDocumentContentChangeWholeDocument(text)])


async def wait_until(condition: Callable[[], Any], timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for the server")
        await asyncio.sleep(0.01)


async def published_for(
    client: Client, uri: str, version: int | None = None, after: int = 0
) -> types.PublishDiagnosticsParams:
    """The first publishDiagnostics for `uri` (at `version`, when given) after the first
    `after` messages the client received."""

    def find() -> types.PublishDiagnosticsParams | None:
        for params in client.published[after:]:
            if params.uri == uri and (version is None or params.version == version):
                return params
        return None

    return await wait_until(find)


async def pull(client: Client, uri: str, previous: str | None = None) -> Any:
    return await client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri), previous_result_id=previous
        )
    )


def codes(diagnostics: Any) -> list[str]:
    return sorted(str(d.code) for d in diagnostics)


def fixture_text(relative: str) -> str:
    return (ROOT / relative).read_text(encoding="utf-8")


def example_files() -> list[Path]:
    """The repository's example scripts and rule fixtures: real-looking code with pitfalls."""
    files = sorted((ROOT / "examples").glob("**/*.py"))
    files += sorted((ROOT / "tests" / "fixtures").glob("TD*/*.py"))
    return files


@pytest.fixture
def uri_of(tmp_path: Path) -> Callable[[str], str]:
    """A file: URI in the test's own folder (nothing needs to exist on disk)."""
    return lambda name: (tmp_path / name).as_uri()


def _offset(text: str, position: types.Position) -> int:
    """A UTF-16 LSP position as an index into `text` (lines end at \\r\\n, \\r or \\n)."""
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    if position.line >= len(starts):
        return len(text)
    start = starts[position.line]
    end = starts[position.line + 1] if position.line + 1 < len(starts) else len(text)
    line = text[start:end].rstrip("\r\n")
    units = 0
    for index, char in enumerate(line):
        if units >= position.character:
            return start + index
        units += 2 if ord(char) > 0xFFFF else 1
    return start + len(line)


def apply_text_edits(text: str, edits: list[types.TextEdit] | tuple[types.TextEdit, ...]) -> str:
    """What an editor does with the edits of one document (all relative to the original)."""
    spans = [(_offset(text, e.range.start), _offset(text, e.range.end), e.new_text) for e in edits]
    for start, end, new_text in sorted(spans, key=lambda s: (s[0], s[1]), reverse=True):
        text = text[:start] + new_text + text[end:]
    return text


def edits_of(edit: types.WorkspaceEdit, uri: str, version: int | None = None) -> list[Any]:
    """The text edits a workspace edit makes to `uri`; with `version`, the edit must be the
    versioned kind for that version."""
    if edit.document_changes is not None:
        found: list[Any] = []
        for change in edit.document_changes:
            assert isinstance(change, types.TextDocumentEdit)
            if change.text_document.uri == uri:
                if version is not None:
                    assert change.text_document.version == version
                found.extend(change.edits)
        return found
    assert version is None, "expected versioned documentChanges"
    return list((edit.changes or {}).get(uri, []))


def engine_codes(text: str, table: dict[str, Any] | None = None, path: str = "x.py") -> list[str]:
    """The codes the engine itself reports for `text` under a `[tool.torchdoctor]`-shaped table:
    what the server must show (rules keep being added, so tests compare with the engine rather
    than with a list that would go stale)."""
    config = config_from_mapping(table or {}, source="test", strict=False)
    return sorted(f.code for f in check(text, path, config))


def only(diagnostics: Any, code: str) -> types.Diagnostic:
    """The one diagnostic with `code` (other rules may also report on a sample)."""
    matching = [d for d in diagnostics if d.code == code]
    assert len(matching) == 1, f"expected one {code}, got {codes(diagnostics)}"
    return matching[0]
