"""Code actions: a quick fix per fixable finding, "Ignore TDxxx on this line", and fix-all.

Actions are built from the findings the server holds for the document version, not from the
`data` the client echoes back. When the client can resolve code actions lazily, the edits are
left out of the list and computed in `codeAction/resolve`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from ..analysis import Config, Finding, Span
from ..analysis.noqa import noqa_edit_text
from .diagnostics import AnalysisResult
from .fix_all import fix_all_text, minimal_replacement

FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.torchdoctor"
QUICK_FIX = types.CodeActionKind.QuickFix.value
ACTION_KINDS = [types.CodeActionKind.QuickFix, FIX_ALL_KIND]

TITLES = {
    "en": {
        "fix_all": "Fix all auto-fixable torchdoctor problems",
        "ignore": "Ignore {code} on this line",
        "unsafe": "{title} (changes behaviour)",
    },
    "zh-CN": {
        "fix_all": "修复所有可自动修复的 torchdoctor 问题",
        "ignore": "在此行忽略 {code}",
        "unsafe": "{title}（会改变行为）",
    },
}


class StaleActionError(JsonRpcException):
    """The document changed between listing the actions and resolving one (ContentModified:
    clients drop the answer quietly and ask again)."""

    CODE = types.LSPErrorCodes.ContentModified.value


@dataclass(frozen=True)
class EditSupport:
    document_changes: bool  # versioned TextDocumentEdits rather than a plain `changes` map
    lazy: bool  # the client resolves an action's edit with codeAction/resolve

    @classmethod
    def of(cls, capabilities: types.ClientCapabilities) -> EditSupport:
        workspace_edit = capabilities.workspace and capabilities.workspace.workspace_edit
        code_action = capabilities.text_document and capabilities.text_document.code_action
        resolve = code_action.resolve_support if code_action else None
        lazy = bool(
            code_action
            and code_action.data_support
            and resolve is not None
            and "edit" in resolve.properties
        )
        return cls(bool(workspace_edit and workspace_edit.document_changes), lazy)


def wanted(only: list[str] | None, kind: str) -> bool:
    """Whether `kind` is among the kinds the client asked for (a kind covers its sub-kinds)."""
    if not only:
        return True
    return any(kind == asked or kind.startswith(f"{asked}.") for asked in only)


def code_actions(
    result: AnalysisResult,
    request: types.CodeActionParams,
    *,
    config: Config,
    support: EditSupport,
    locale: str,
) -> list[types.CodeAction]:
    mapper = result.mapper
    start = mapper.to_char(request.range.start)
    end = mapper.to_char(request.range.end)
    only = [str(kind) for kind in request.context.only] if request.context.only else None
    titles = TITLES.get(locale, TITLES["en"])
    at_range = [f for f in result.findings if _touches(f.span, start, end)]
    actions: list[types.CodeAction] = []
    if wanted(only, QUICK_FIX):
        for finding in at_range:
            if finding.fix is None:
                continue
            title = finding.fix.title
            if not finding.fix.safe:
                title = titles["unsafe"].format(title=title)
            actions.append(
                _action(
                    result,
                    support,
                    title=title,
                    kind=QUICK_FIX,
                    finding=finding,
                    action="fix",
                    preferred=finding.fix.safe,
                    config=config,
                )
            )
        for finding in at_range:
            if noqa_replacement(result, finding) is None:
                continue  # the line's suppression comment already covers every code
            actions.append(
                _action(
                    result,
                    support,
                    title=titles["ignore"].format(code=finding.code),
                    kind=QUICK_FIX,
                    finding=finding,
                    action="noqa",
                    preferred=False,
                    config=config,
                )
            )
    if wanted(only, FIX_ALL_KIND) and any(f.fix and f.fix.safe for f in result.findings):
        actions.append(
            _action(
                result,
                support,
                title=titles["fix_all"],
                kind=FIX_ALL_KIND,
                finding=None,
                action="fixAll",
                preferred=False,
                config=config,
            )
        )
    return actions


def _touches(span: Span, start: tuple[int, int], end: tuple[int, int]) -> bool:
    """The finding overlaps the requested range, or holds the cursor (an empty range)."""
    return (span.start_line, span.start_col) <= end and start <= (span.end_line, span.end_col)


def _action(
    result: AnalysisResult,
    support: EditSupport,
    *,
    title: str,
    kind: str,
    finding: Finding | None,
    action: str,
    preferred: bool,
    config: Config,
) -> types.CodeAction:
    data: dict[str, Any] = {"uri": result.uri, "version": result.version, "action": action}
    diagnostics = None
    if finding is not None:
        data["code"] = finding.code
        data["span"] = list(_span_tuple(finding.span))
        diagnostics = [result.diagnostics[result.findings.index(finding)]]
    code_action = types.CodeAction(
        title=title,
        kind=kind,
        diagnostics=diagnostics,
        is_preferred=preferred or None,
        data=data,
    )
    if not support.lazy:
        code_action.edit = edit_for(result, data, config=config, support=support)
    return code_action


def resolve_action(
    result: AnalysisResult,
    code_action: types.CodeAction,
    *,
    config: Config,
    support: EditSupport,
) -> types.CodeAction:
    data = code_action.data
    if not isinstance(data, dict) or "action" not in data:
        raise JsonRpcInvalidParams("this code action was not made by torchdoctor (no data)")
    if data.get("version") != result.version:
        raise StaleActionError(
            "the document changed since the code action was offered; ask for it again"
        )
    code_action.edit = edit_for(result, data, config=config, support=support)
    return code_action


def edit_for(
    result: AnalysisResult, data: dict[str, Any], *, config: Config, support: EditSupport
) -> types.WorkspaceEdit:
    action = data["action"]
    if action == "fixAll":
        return workspace_edit(result, fix_all_edits(result, config), support)
    finding = _find(result, str(data.get("code")), data.get("span"))
    if action == "fix" and finding.fix is not None:
        mapper = result.mapper
        edits = [types.TextEdit(mapper.range(e.span), e.content) for e in finding.fix.edits]
        return workspace_edit(result, edits, support)
    if action == "noqa":
        replacement = noqa_replacement(result, finding)
        edits = [] if replacement is None else [replacement]
        return workspace_edit(result, edits, support)
    raise JsonRpcInvalidParams(f"unknown code action {action!r}")


def fix_all_edits(result: AnalysisResult, config: Config) -> list[types.TextEdit]:
    document = result.document
    fixed = fix_all_text(document.text, document.path, config, result.findings)
    replacement = minimal_replacement(document.text, fixed)
    if replacement is None:
        return []
    return [types.TextEdit(result.mapper.range(replacement.span), replacement.content)]


def noqa_replacement(result: AnalysisResult, finding: Finding) -> types.TextEdit | None:
    """The edit that adds the finding's code to the `# noqa` comment of the line it starts on
    (the line the engine checks for suppressions)."""
    line = finding.span.start_line
    old = result.document.index.line(line)
    new = noqa_edit_text(old, finding.code)
    if new == old:
        return None
    prefix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(old), len(new)) - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    span = Span(line, prefix, line, len(old) - suffix)
    return types.TextEdit(result.mapper.range(span), new[prefix : len(new) - suffix])


def workspace_edit(
    result: AnalysisResult, edits: list[types.TextEdit], support: EditSupport
) -> types.WorkspaceEdit:
    if support.document_changes:
        identifier = types.OptionalVersionedTextDocumentIdentifier(result.uri, result.version)
        return types.WorkspaceEdit(
            document_changes=[types.TextDocumentEdit(identifier, list(edits))]
        )
    return types.WorkspaceEdit(changes={result.uri: list(edits)})


def _span_tuple(span: Span) -> tuple[int, int, int, int]:
    return span.start_line, span.start_col, span.end_line, span.end_col


def _find(result: AnalysisResult, code: str, span: Any) -> Finding:
    for finding in result.findings:
        if finding.code == code and list(_span_tuple(finding.span)) == list(span or ()):
            return finding
    raise StaleActionError(f"{code} is no longer reported there; ask for the code actions again")
