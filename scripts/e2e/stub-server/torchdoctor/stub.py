"""One rule (TD101), its hover, quick fix and fix-all, the "Probe model" CodeLens and a
probe that only counts parameters: enough to drive the extension through every step of
its end-to-end test."""

from __future__ import annotations

import asyncio
import json
import re
import sys

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method

CLASS_RE = re.compile(r"^\s*class\s+(\w+)\s*\(([^)]*)\)")
DOC = (
    "**TD101 missing-zero-grad**\n\n"
    "Gradients accumulate: `backward()` adds to `.grad`, so a loop that never zeroes them "
    "steps with the sum of every batch so far. Call `optimizer.zero_grad()` once per iteration."
)


class Protocol(LanguageServerProtocol):
    """Remembers the workDoneToken of each executeCommand (pygls does not pass it on)."""

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: types.ExecuteCommandParams):
        self._server.work_done_token = params.work_done_token
        return (yield from super().lsp_workspace__execute_command(params))


class StubServer(LanguageServer):
    work_done_token: types.ProgressToken | None = None
    interpreter: str = sys.executable


server = StubServer("torchdoctor-stub", "0.0.0", protocol_cls=Protocol)


def find_td101(lines: list[str]) -> list[tuple[int, int, str, str]]:
    """(for-line, first body line, body indent, optimizer name) of loops that never zero grads."""
    found = []
    for index, line in enumerate(lines):
        if not re.match(r"^\s*for\s.*:\s*$", line):
            continue
        indent = len(line) - len(line.lstrip())
        body = []
        for follower in lines[index + 1 :]:
            if follower.strip() and len(follower) - len(follower.lstrip()) <= indent:
                break
            body.append(follower)
        text = "\n".join(body)
        step = re.search(r"(\w+)\.step\(\)", text)
        nested_for = any(re.match(r"^\s*for\s", b) for b in body)
        if ".backward()" in text and step and "zero_grad" not in text and not nested_for:
            first = next(b for b in body if b.strip())
            found.append((index, index + 1, first[: len(first) - len(first.lstrip())], step.group(1)))
    return found


def diagnostics(uri: str) -> list[types.Diagnostic]:
    lines = server.workspace.get_text_document(uri).source.splitlines()
    result = []
    for line, body_line, body_indent, optimizer in find_td101(lines):
        start = len(lines[line]) - len(lines[line].lstrip())
        result.append(
            types.Diagnostic(
                range=types.Range(types.Position(line, start), types.Position(line, len(lines[line].rstrip()))),
                message=f"Gradients are never zeroed in this loop: call {optimizer}.zero_grad() each iteration",
                severity=types.DiagnosticSeverity.Warning,
                code="TD101",
                source="torchdoctor",
                data={"line": body_line, "text": f"{body_indent}{optimizer}.zero_grad()\n"},
            )
        )
    return result


def publish(uri: str) -> None:
    server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics(uri)))


@server.feature(types.INITIALIZE)
def initialize(params: types.InitializeParams) -> None:
    settings = (params.initialization_options or {}).get("settings", {})
    server.interpreter = settings.get("interpreter") or sys.executable


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(params: types.DidOpenTextDocumentParams) -> None:
    publish(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(params: types.DidChangeTextDocumentParams) -> None:
    publish(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(params: types.HoverParams) -> types.Hover | None:
    for diagnostic in diagnostics(params.text_document.uri):
        if diagnostic.range.start.line == params.position.line:
            return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=DOC))
    return None


def fix_edit(uri: str, diagnostic: types.Diagnostic) -> types.WorkspaceEdit:
    data = diagnostic.data if isinstance(diagnostic.data, dict) else {}
    position = types.Position(data["line"], 0)
    return types.WorkspaceEdit(changes={uri: [types.TextEdit(types.Range(position, position), data["text"])]})


@server.feature(types.TEXT_DOCUMENT_CODE_ACTION)
def code_action(params: types.CodeActionParams) -> list[types.CodeAction]:
    actions = []
    for diagnostic in params.context.diagnostics:
        if diagnostic.code == "TD101" and diagnostic.data:
            optimizer = diagnostic.data["text"].strip()
            actions.append(
                types.CodeAction(
                    title=f"Insert {optimizer} at the start of the loop",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    is_preferred=True,
                    edit=fix_edit(params.text_document.uri, diagnostic),
                )
            )
    return actions


@server.feature(types.TEXT_DOCUMENT_CODE_LENS)
def code_lens(params: types.CodeLensParams) -> list[types.CodeLens]:
    lines = server.workspace.get_text_document(params.text_document.uri).source.splitlines()
    lenses = []
    for index, line in enumerate(lines):
        match = CLASS_RE.match(line)
        if match and "Module" in match.group(2):
            lenses.append(
                types.CodeLens(
                    range=types.Range(types.Position(index, 0), types.Position(index, len(line))),
                    command=types.Command(
                        title="Probe model",
                        command="torchdoctor.probe",
                        arguments=[params.text_document.uri, match.group(1)],
                    ),
                )
            )
    return lenses


COUNT_SCRIPT = r"""
import ast, json, sys, torch
path, name = sys.argv[1], sys.argv[2]
tree = ast.parse(open(path, encoding="utf-8").read(), path)
tree.body = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef))]
scope = {"__name__": "probe_target"}
exec(compile(tree, path, "exec"), scope)
model = scope[name]()
total = sum(p.numel() for p in model.parameters())
trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
modules = [{"name": n, "type": type(m).__name__, "params": sum(p.numel() for p in m.parameters(recurse=False)),
            "forward_ms": 0.1 * (i + 1)} for i, (n, m) in enumerate(model.named_modules()) if n]
print(json.dumps({"schema": 1, "torch_version": torch.__version__, "device": "cpu",
                  "params": {"total": total, "trainable": trainable}, "param_bytes": total * 4,
                  "modules": modules, "latency": {"forward_ms": {"median": 1.5, "spread": 0.1}},
                  "findings": [], "recommendation": {"strategy": "single device", "reason": "stub"}}))
"""


@server.command("torchdoctor.server.probe")
async def probe(ls: StubServer, *args):
    request = args[0]
    token = ls.work_done_token
    if token is not None:
        ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(title="Probing", percentage=0))
        ls.work_done_progress.report(token, types.WorkDoneProgressReport(message="building model", percentage=30))
    path = server.workspace.get_text_document(request["uri"]).path
    process = await asyncio.create_subprocess_exec(
        ls.interpreter, "-c", COUNT_SCRIPT, path, request["className"],
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await process.communicate()
    if token is not None:
        ls.work_done_progress.end(token, types.WorkDoneProgressEnd())
    if process.returncode != 0:
        raise RuntimeError(f"{path}: probe failed: {stderr.decode()[-2000:]}")
    return json.loads(stdout)


@server.command("torchdoctor.server.fixAll")
async def fix_all(ls: StubServer, *args):
    uri = args[0]
    for diagnostic in diagnostics(uri):
        await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=fix_edit(uri, diagnostic)))
