"""Code actions: every quick fix, fix-all against `torchdoctor check --fix`, ignore-on-line,
lazy resolution, and the server's fix-all command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from torchdoctor.analysis import check
from torchdoctor.analysis.fixes import apply_edits

from .conftest import (
    apply_text_edits,
    change_document,
    codes,
    edits_of,
    engine_codes,
    only,
    open_document,
    published_for,
    replace_all,
    shared_session,
    vscode_capabilities,
)
from .samples import BACKWARD_TWICE, MISSING_ZERO_GRAD, TRAINING_LOOPS

pytestmark = pytest.mark.asyncio(loop_scope="module")

shared = shared_session()

FIX_ALL = "source.fixAll.torchdoctor"


async def actions_at(
    client, uri: str, range_: types.Range, only: list[str] | None = None, diagnostics=()
) -> list[types.CodeAction]:
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri),
            range=range_,
            context=types.CodeActionContext(diagnostics=list(diagnostics), only=only),
        )
    )
    return list(result or [])


async def resolved(client, action: types.CodeAction) -> types.CodeAction:
    if action.edit is not None:
        return action
    return await client.code_action_resolve_async(action)


def whole(text: str) -> types.Range:
    lines = text.split("\n")
    return types.Range(types.Position(0, 0), types.Position(len(lines) - 1, len(lines[-1])))


def cli_fix(text: str, name: str, cwd: Path) -> str:
    """What `torchdoctor check --fix` writes for this source."""
    done = subprocess.run(
        [sys.executable, "-m", "torchdoctor", "check", "--fix", "--stdin-filename", name],
        input=text.encode("utf-8"),
        capture_output=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr.decode()
    return done.stdout.decode("utf-8")


@pytest.mark.parametrize(
    ("sample", "code"),
    [
        (MISSING_ZERO_GRAD, "TD101"),
        (TRAINING_LOOPS, "TD102"),
        (BACKWARD_TWICE, "TD103"),
        (TRAINING_LOOPS, "TD104"),
    ],
)
async def test_each_quick_fix_applies_the_rules_fix(shared, uri_of, sample, code):
    client = shared
    uri = uri_of("fix.py")
    open_document(client, uri, sample)
    published = await published_for(client, uri, version=1)
    findings = [f for f in check(sample, uri) if f.code == code]
    diagnostics = [d for d in published.diagnostics if d.code == code]
    assert findings and len(findings) == len(diagnostics)
    for finding, diagnostic in zip(findings, diagnostics, strict=True):
        actions = await actions_at(
            client, uri, diagnostic.range, only=["quickfix"], diagnostics=[diagnostic]
        )
        (quick_fix,) = [a for a in actions if a.title == finding.fix.title]
        assert quick_fix.kind == types.CodeActionKind.QuickFix
        assert quick_fix.is_preferred is True
        assert quick_fix.diagnostics is not None and quick_fix.diagnostics[0].code == code
        assert quick_fix.edit is None, "VS Code resolves edits lazily"
        action = await resolved(client, quick_fix)
        fixed = apply_text_edits(sample, edits_of(action.edit, uri, version=1))
        assert fixed == apply_edits(sample, finding.fix.edits)
        # the fix removes exactly the finding it was offered for
        remaining = [f for f in check(fixed, uri) if f.code == code]
        assert len(remaining) == len(findings) - 1


@pytest.mark.parametrize("line_ending", ["\n", "\r\n"])
async def test_fix_all_matches_the_cli_on_several_rules_and_line_endings(
    shared, tmp_path, line_ending
):
    text = (TRAINING_LOOPS + "\n" + BACKWARD_TWICE.split("\n", 3)[3]).replace("\n", line_ending)
    client = shared
    uri = (tmp_path / "many.py").as_uri()
    open_document(client, uri, text)
    await published_for(client, uri, version=1)
    (fix_all,) = await actions_at(client, uri, whole(text), only=[FIX_ALL])
    action = await resolved(client, fix_all)
    fixed = apply_text_edits(text, edits_of(action.edit, uri, version=1))
    expected = cli_fix(text, "many.py", tmp_path)
    assert fixed == expected
    assert fixed != text
    assert ("\r\n" in fixed) == (line_ending == "\r\n")


async def test_fix_all_command_applies_the_edit_through_the_client(shared, tmp_path):
    client = shared
    uri = (tmp_path / "cmd.py").as_uri()
    open_document(client, uri, TRAINING_LOOPS)
    await published_for(client, uri, version=1)
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="torchdoctor.server.fixAll", arguments=[uri])
    )
    assert answer["applied"] is True
    (request,) = client.applied_edits
    fixed = apply_text_edits(TRAINING_LOOPS, edits_of(request.edit, uri, version=1))
    assert fixed == cli_fix(TRAINING_LOOPS, "cmd.py", tmp_path)


async def test_ignore_on_this_line_adds_a_noqa_comment_that_silences_the_rule(shared, uri_of):
    client = shared
    uri = uri_of("noqa.py")
    open_document(client, uri, MISSING_ZERO_GRAD)
    diagnostic = only((await published_for(client, uri, version=1)).diagnostics, "TD101")
    actions = await actions_at(client, uri, diagnostic.range, diagnostics=[diagnostic])
    (ignore,) = [a for a in actions if a.title == "Ignore TD101 on this line"]
    assert ignore.kind == types.CodeActionKind.QuickFix
    assert not ignore.is_preferred
    action = await resolved(client, ignore)
    fixed = apply_text_edits(MISSING_ZERO_GRAD, edits_of(action.edit, uri, version=1))
    assert fixed.split("\n")[8] == "    loss.backward()  # noqa: TD101"

    replace_all(client, uri, 2, fixed)
    silenced = await published_for(client, uri, version=2)
    assert "TD101" not in codes(silenced.diagnostics)
    assert codes(silenced.diagnostics) == engine_codes(fixed)


async def test_ignore_extends_an_existing_noqa_comment(shared, uri_of):
    client = shared
    uri = uri_of("noqa2.py")
    text = MISSING_ZERO_GRAD.replace("loss.backward()", "loss.backward()  # noqa: E501")
    open_document(client, uri, text)
    diagnostic = only((await published_for(client, uri, version=1)).diagnostics, "TD101")
    actions = await actions_at(client, uri, diagnostic.range)
    (ignore,) = [a for a in actions if a.title.startswith("Ignore")]
    action = await resolved(client, ignore)
    fixed = apply_text_edits(text, edits_of(action.edit, uri, version=1))
    assert fixed.split("\n")[8] == "    loss.backward()  # noqa: E501, TD101"


async def test_only_filters_the_kinds_offered(shared, uri_of):
    client = shared
    uri = uri_of("kinds.py")
    open_document(client, uri, TRAINING_LOOPS)
    await published_for(client, uri, version=1)
    everything = await actions_at(client, uri, whole(TRAINING_LOOPS))
    assert {a.kind for a in everything} == {types.CodeActionKind.QuickFix, FIX_ALL}
    quick = await actions_at(client, uri, whole(TRAINING_LOOPS), only=["quickfix"])
    assert {a.kind for a in quick} == {types.CodeActionKind.QuickFix}
    source = await actions_at(client, uri, whole(TRAINING_LOOPS), only=["source"])
    assert [a.kind for a in source] == [FIX_ALL]
    # nothing offered where nothing is wrong
    assert (
        await actions_at(
            client, uri, types.Range(types.Position(3, 0), types.Position(3, 5)), only=["quickfix"]
        )
        == []
    )


async def test_clients_without_document_changes_get_a_plain_changes_map(lsp, uri_of):
    capabilities = vscode_capabilities(lazy_actions=False)
    capabilities.workspace.workspace_edit.document_changes = False
    client = await lsp.start(capabilities=capabilities)
    uri = uri_of("plain.py")
    open_document(client, uri, MISSING_ZERO_GRAD)
    diagnostic = only((await published_for(client, uri, version=1)).diagnostics, "TD101")
    actions = await actions_at(client, uri, diagnostic.range, only=["quickfix"])
    edit = actions[0].edit
    assert edit is not None and edit.document_changes is None
    fixed = apply_text_edits(MISSING_ZERO_GRAD, edits_of(edit, uri))
    assert "TD101" not in codes([type("D", (), {"code": f.code}) for f in check(fixed, uri)])


async def test_resolving_after_an_edit_reports_content_modified(shared, uri_of):
    client = shared
    uri = uri_of("stale.py")
    open_document(client, uri, MISSING_ZERO_GRAD)
    diagnostic = only((await published_for(client, uri, version=1)).diagnostics, "TD101")
    (quick_fix, *_) = await actions_at(client, uri, diagnostic.range, only=["quickfix"])
    change_document(
        client,
        uri,
        2,
        [
            types.TextDocumentContentChangePartial(
                range=types.Range(types.Position(0, 0), types.Position(0, 0)), text="# edited\n"
            )
        ],
    )
    with pytest.raises(JsonRpcException) as raised:
        await client.code_action_resolve_async(quick_fix)
    assert raised.value.code == types.LSPErrorCodes.ContentModified
