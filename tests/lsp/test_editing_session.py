"""Long editing sessions against the real server: random incremental edits (multi-line inserts
and deletes, non-ASCII and CRLF text, half-typed code), opens, closes, hovers, quick fixes and
settings changes over several documents. The server must stay up, answer every request with a
well-formed response, and end with the diagnostics a fresh analysis of each final text gives.

The sessions are seeded: a failure names its seed, and the same seed replays the same session.
"""

from __future__ import annotations

import asyncio
import random
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from torchdoctor.analysis import check
from torchdoctor.analysis.config import config_from_mapping

from .conftest import (
    WAIT,
    Client,
    Sessions,
    apply_text_edits,
    example_files,
    set_settings,
    vscode_capabilities,
    wait_until,
)

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(180),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

LINE_BREAK = re.compile(r"\r\n|\r|\n")
SEEDS = [path for path in example_files() if path.stat().st_size < 12_000]
# what people type, half-typed on purpose, plus the characters that break naive position maths
SNIPPETS = [
    "optimizer.zero_grad()\n",
    "loss.backward()\n",
    "    x = x.view(-1)\n",
    "x.transpose(0, 1).view(4, -1)",
    "def forward(self, x",
    "for batch in loader:\n    out = model(",
    "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n",
    "with torch.no_grad():\n    ",
    "total_loss += loss\n",
    '"""unterminated',
    "(((",
    "]])",
    "lambda: ",
    "\\\n",
    "# 注释：变量 λ\n",
    "名前 = torch.zeros(2)  # 🙂🙂\n",
    "s = '𝔘𝔫𝔦𝔠𝔬𝔡𝔢'\n",
    "\r\n",
    "\r",
    "\t",
    "import torch\r\nfrom torch import nn\r\n",
    "\ufeff",
    "\x0c",
    "\u2028",
    "",
]
# (what the editor sends, the same selection as a [tool.torchdoctor] table for the engine)
SETTINGS = [
    ({}, {}),
    ({"select": ["TD1"]}, {"select": ["TD1"]}),
    ({"ignore": ["TD101", "TD7"]}, {"ignore": ["TD101", "TD7"]}),
    ({"select": ["ALL"], "locale": "zh-CN"}, {"select": ["ALL"]}),
    ({"locale": "en", "codeLens": False}, {}),
    ({"select": 42}, {}),  # a wrong type falls back to the default and says so
    ({"enable": False}, None),  # None: no diagnostics at all
]


# ---- the client's own model of the documents (independent of the server's code) -------------
def line_starts(text: str) -> list[int]:
    return [0] + [match.end() for match in LINE_BREAK.finditer(text)]


def line_at(text: str, starts: list[int], line: int) -> str:
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    return text[starts[line] : end].rstrip("\r\n")


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le", errors="surrogatepass")) // 2


def position_of(text: str, offset: int) -> types.Position:
    """The LSP position (UTF-16) of a character offset; an offset inside a line break is the
    end of its line, the only place LSP can name there."""
    starts = line_starts(text)
    line = max(index for index, start in enumerate(starts) if start <= offset)
    column = min(offset - starts[line], len(line_at(text, starts, line)))
    return types.Position(line, utf16_units(text[starts[line] : starts[line] + column]))


def offset_of(text: str, position: types.Position) -> int:
    """Inverse of position_of; past the end of a line clamps to its end (clients send that)."""
    starts = line_starts(text)
    if position.line >= len(starts):
        return len(text)
    line = line_at(text, starts, position.line)
    units = 0
    for index, char in enumerate(line):
        if units >= position.character:
            return starts[position.line] + index
        units += utf16_units(char)
    return starts[position.line] + len(line)


def expected_diagnostics(text: str, path: str, table: dict[str, Any] | None) -> list[tuple]:
    """(code, range) of what a fresh analysis of `text` reports, in UTF-16 positions."""
    if table is None:
        return []
    config = config_from_mapping(table, source="test", strict=False)
    lines = LINE_BREAK.split(text)
    found = []
    for finding in check(text, path, config):
        span = finding.span
        start = _utf16(lines, span.start_line, span.start_col)
        end = _utf16(lines, span.end_line, span.end_col)
        found.append((finding.code, *start, *end))
    return sorted(found)


def _utf16(lines: list[str], line: int, col: int) -> tuple[int, int]:
    if line >= len(lines):  # the engine's "end of the document"
        return len(lines) - 1, utf16_units(lines[-1])
    return line, utf16_units(lines[line][:col])


def actual_diagnostics(diagnostics: Any) -> list[tuple]:
    return sorted(
        (
            str(d.code),
            d.range.start.line,
            d.range.start.character,
            d.range.end.line,
            d.range.end.character,
        )
        for d in diagnostics
    )


def assert_range_inside(text: str, range_: types.Range, what: str) -> None:
    """A range the server sends for `text` names real places in it, start before end."""
    starts = line_starts(text)
    for position in (range_.start, range_.end):
        assert 0 <= position.line < len(starts), f"{what}: line {position.line} of {len(starts)}"
        width = utf16_units(line_at(text, starts, position.line))
        assert 0 <= position.character <= width, f"{what}: {position} on a {width}-unit line"
    start, end = range_.start, range_.end
    assert (start.line, start.character) <= (end.line, end.character), what


@dataclass
class OpenText:
    uri: str
    path: str
    text: str
    version: int


@dataclass
class Session:
    """Drives one server through a seeded random session and keeps the client-side truth."""

    client: Client
    folder: Path
    rng: random.Random
    open: dict[str, OpenText] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)  # last version per uri, across opens
    closed: set[str] = field(default_factory=set)
    table: dict[str, Any] | None = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    requests: int = 0

    # -- documents
    def open_new(self) -> None:
        seed = self.rng.choice(SEEDS)
        text = seed.read_text(encoding="utf-8")
        if self.rng.random() < 0.3:
            text = text.replace("\n", "\r\n")
        name = f"{seed.parent.name}_{seed.stem}_{self.rng.randrange(4)}.py"
        uri = (self.folder / name).as_uri()
        if uri in self.open:
            return
        version = self.versions.get(uri, 0) + 1
        self.versions[uri] = version
        self.open[uri] = OpenText(uri, str(self.folder / name), text, version)
        self.closed.discard(uri)
        self.log.append(f"open {name}")
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", version, text))
        )

    def close_one(self) -> None:
        document = self.open.pop(self.rng.choice(sorted(self.open)))
        self.closed.add(document.uri)
        self.log.append(f"close {Path(document.path).name}")
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(document.uri))
        )

    def pick(self) -> OpenText:
        return self.open[self.rng.choice(sorted(self.open))]

    def random_offset(self, text: str) -> int:
        return self.rng.randint(0, len(text))

    def insertion(self) -> str:
        roll = self.rng.random()
        if roll < 0.5:
            return self.rng.choice(SNIPPETS)
        seed = self.rng.choice(SEEDS).read_text(encoding="utf-8").split("\n")
        start = self.rng.randrange(len(seed))
        chunk = "\n".join(seed[start : start + self.rng.randint(1, 6)])
        return chunk[: self.rng.randint(0, len(chunk))]  # cut anywhere: half-typed

    def change(self, document: OpenText, changes: list[tuple[int, int, str]]) -> None:
        """Send changes (offsets into the text as it is when each change applies) as ranges."""
        events: list[types.TextDocumentContentChangeEvent] = []
        for start, end, new_text in changes:
            text = document.text
            start_position, end_position = position_of(text, start), position_of(text, end)
            if self.rng.random() < 0.05:  # past the end of the line: clients send that too
                end_position = types.Position(end_position.line, end_position.character + 50)
            events.append(
                types.TextDocumentContentChangePartial(
                    range=types.Range(start_position, end_position), text=new_text
                )
            )
            # the edit as LSP defines it, from the positions actually sent
            first, last = offset_of(text, start_position), offset_of(text, end_position)
            document.text = text[:first] + new_text + text[max(first, last) :]
        document.version += 1
        self.versions[document.uri] = document.version
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=document.uri, version=document.version),
                events,
            )
        )

    def edit(self) -> None:
        document = self.pick()
        kind = self.rng.choice(["insert", "delete", "replace", "type", "backspace", "multi"])
        self.log.append(f"{kind} {Path(document.path).name} v{document.version + 1}")
        text = document.text
        if kind == "insert":
            at = self.random_offset(text)
            self.change(document, [(at, at, self.insertion())])
        elif kind == "delete":
            start = self.random_offset(text)
            end = min(len(text), start + self.rng.choice([1, 2, 10, 80, 400]))
            self.change(document, [(start, end, "")])
        elif kind == "replace":
            start = self.random_offset(text)
            end = min(len(text), start + self.rng.randint(0, 200))
            self.change(document, [(start, end, self.insertion())])
        elif kind == "type":  # one keystroke per change, as an editor sends them
            at = self.random_offset(text)
            for char in self.insertion()[:30]:
                self.change(document, [(at, at, char)])
                at += 1
        elif kind == "backspace":
            at = self.random_offset(text)
            for _ in range(self.rng.randint(1, 15)):
                if at == 0:
                    break
                self.change(document, [(at - 1, at, "")])
                at = min(at - 1, len(document.text))
        else:  # several changes in one notification, each on the text the previous left
            changes = []
            simulated = document.text
            for _ in range(self.rng.randint(2, 4)):
                start = self.rng.randint(0, len(simulated))
                end = min(len(simulated), start + self.rng.randint(0, 30))
                new_text = self.insertion()
                changes.append((start, end, new_text))
                simulated = simulated[:start] + new_text + simulated[end:]
            self.change(document, changes)

    def replace_all(self) -> None:
        document = self.pick()
        document.text = self.rng.choice(SEEDS).read_text(encoding="utf-8")
        document.version += 1
        self.versions[document.uri] = document.version
        self.log.append(f"replace-all {Path(document.path).name}")
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=document.uri, version=document.version),
                [types.TextDocumentContentChangeWholeDocument(document.text)],
            )
        )

    # -- requests
    async def hover(self) -> None:
        document = self.pick()
        text, position = (
            document.text,
            position_of(document.text, self.random_offset(document.text)),
        )
        self.log.append(f"hover {Path(document.path).name} {position}")
        self.requests += 1
        answer = await self.client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(document.uri), position)
        )
        if answer is None:
            return
        assert isinstance(answer, types.Hover)
        assert isinstance(answer.contents, types.MarkupContent) and answer.contents.value
        if answer.range is not None:
            assert_range_inside(text, answer.range, "hover range")

    async def code_actions(self) -> None:
        document = self.pick()
        text = document.text
        start = self.random_offset(text)
        end = min(len(text), start + self.rng.randint(0, 300))
        range_ = types.Range(position_of(text, start), position_of(text, end))
        shown = [
            d
            for d in self.client.diagnostics.get(document.uri, [])
            if d.range.start.line <= range_.end.line and d.range.end.line >= range_.start.line
        ]
        self.log.append(f"codeAction {Path(document.path).name} {range_}")
        self.requests += 1
        actions = await self.client.text_document_code_action_async(
            types.CodeActionParams(
                types.TextDocumentIdentifier(document.uri),
                range_,
                types.CodeActionContext(diagnostics=shown),
            )
        )
        for action in actions or ():
            assert isinstance(action, types.CodeAction) and action.title
        fixes = [a for a in actions or () if isinstance(a, types.CodeAction)]
        if not fixes or self.rng.random() < 0.4:
            return
        action = self.rng.choice(fixes)
        if action.edit is None:
            self.requests += 1
            try:
                action = await self.client.code_action_resolve_async(action)
            except JsonRpcException as error:  # a well-formed refusal is an answer too
                assert error.code in (
                    types.LSPErrorCodes.ContentModified.value,
                    types.ErrorCodes.InvalidParams.value,
                ), error
                return
        assert action.edit is not None, action
        edits = _edits_for(action.edit, document.uri, document.version)
        for edit in edits:
            assert_range_inside(text, edit.range, f"edit of {action.title!r}")
        self.apply_edits(document, edits, action.title)

    def apply_edits(self, document: OpenText, edits: list[types.TextEdit], title: str) -> None:
        """What the editor does with a chosen quick fix: apply it and send the change."""
        if not edits:
            return
        self.log.append(f"apply {title!r}")
        new_text = apply_text_edits(document.text, edits)
        ordered = sorted(
            edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True
        )
        events: list[types.TextDocumentContentChangeEvent] = [
            types.TextDocumentContentChangePartial(range=e.range, text=e.new_text) for e in ordered
        ]
        document.text = new_text
        document.version += 1
        self.versions[document.uri] = document.version
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=document.uri, version=document.version),
                events,
            )
        )

    def change_settings(self) -> None:
        editor, table = self.rng.choice(SETTINGS)
        self.table = table
        self.log.append(f"settings {editor}")
        set_settings(self.client, editor)
        self.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings=None)
        )

    # -- the end state
    def expected(self) -> dict[str, list[tuple]]:
        return {
            uri: expected_diagnostics(document.text, document.path, self.table)
            for uri, document in self.open.items()
        }

    def shown(self) -> dict[str, list[tuple]]:
        return {uri: actual_diagnostics(self.client.diagnostics.get(uri, [])) for uri in self.open}


def _edits_for(edit: types.WorkspaceEdit, uri: str, version: int) -> list[types.TextEdit]:
    found: list[types.TextEdit] = []
    for change in edit.document_changes or ():
        assert isinstance(change, types.TextDocumentEdit)
        assert change.text_document.uri == uri
        assert change.text_document.version == version, "an edit for another version"
        found.extend(e for e in change.edits if isinstance(e, types.TextEdit))
    for changed_uri, edits in (edit.changes or {}).items():
        assert changed_uri == uri
        found.extend(edits)
    return found


async def run_session(session: Session, steps: int) -> None:
    rng = session.rng
    for _ in range(3):
        session.open_new()
    for _ in range(steps):
        roll = rng.random()
        if not session.open or (roll < 0.04 and len(session.open) < 5):
            session.open_new()
        elif roll < 0.07 and len(session.open) > 1:
            session.close_one()
        elif roll < 0.10:
            session.change_settings()
        elif roll < 0.12:
            session.replace_all()
        elif roll < 0.22:
            await session.hover()
        elif roll < 0.32:
            await session.code_actions()
        else:
            session.edit()
        if rng.random() < 0.1:
            await asyncio.sleep(0)  # sometimes let the server catch up, sometimes not


async def assert_settles_on_fresh_analysis(session: Session) -> None:
    """Eventually (the settings round trip is asynchronous) every open document shows exactly
    what the engine finds in its final text, and every closed one shows nothing."""
    client = session.client

    def settled() -> bool:
        return session.shown() == session.expected() and all(
            not client.diagnostics.get(uri) for uri in session.closed
        )

    try:
        await wait_until(settled, WAIT)
    except AssertionError:
        expected, shown = session.expected(), session.shown()
        wrong = {
            uri: (expected[uri], shown[uri]) for uri in expected if expected[uri] != shown[uri]
        }
        raise AssertionError(
            f"diagnostics differ from a fresh analysis: {wrong}\nlast steps: {session.log[-15:]}"
        ) from None


def assert_server_healthy(client: Client) -> None:
    assert client._server is not None and client._server.returncode is None, "the server died"
    errors = [m.message for m in client.messages if m.type == types.MessageType.Error]
    assert errors == [], errors


@pytest.mark.parametrize("seed", [11, 23, 37])
async def test_random_editing_session_ends_with_fresh_diagnostics(lsp: Sessions, tmp_path, seed):
    client = await lsp.start(capabilities=vscode_capabilities())
    set_settings(client, {})
    session = Session(client, tmp_path, random.Random(seed))
    try:
        await run_session(session, steps=600)
        assert_server_healthy(client)
        await assert_settles_on_fresh_analysis(session)
        assert_server_healthy(client)
    except AssertionError as error:
        raise AssertionError(f"seed {seed}: {error}") from None
    assert session.requests > 20
    # versions published per document only move forward
    last: dict[str, int] = {}
    for params in client.published:
        if params.version is not None:
            assert params.version >= last.get(params.uri, 0), (seed, params.uri, params.version)
            last[params.uri] = params.version


def resident_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for process {pid}")


async def settle(session: Session) -> None:
    """Wait until every open document shows the analysis of its final text."""
    await wait_until(lambda: session.shown() == session.expected(), WAIT)


async def edit_burst(session: Session, edits: int, fresh_uris: bool) -> None:
    """`edits` changes that leave the texts about as long as they were: typing a snippet and
    deleting it again, with a hover and a code-action request every 50 changes and, with
    `fresh_uris`, a document opened and closed under a new name every 200."""
    done = 0
    while done < edits:
        document = session.pick()
        at = session.random_offset(document.text)
        snippet = session.rng.choice(SNIPPETS)[:20] or "x"
        for char in snippet:
            session.change(document, [(at, at, char)])
            at += 1
        session.change(document, [(at - len(snippet), at, "")])
        done += len(snippet) + 1
        if done % 50 < len(snippet) + 1:
            await session.hover()
            await session.code_actions()
            await asyncio.sleep(0)
        if fresh_uris and done % 200 < len(snippet) + 1:
            session.open_new()
            session.close_one()


async def test_memory_stays_bounded_over_thousands_of_edits(lsp: Sessions, tmp_path):
    """Resident memory of the server after warm-up, and again after several thousand more
    edits: growth stays far below what keeping per-edit state would cost."""
    client = await lsp.start(capabilities=vscode_capabilities())
    set_settings(client, {})
    session = Session(client, tmp_path, random.Random(5))
    pid = client._server.pid
    for _ in range(3):
        session.open_new()
    await edit_burst(session, 600, fresh_uris=True)  # warm-up: caches, jedi-free hovers, fixes
    await settle(session)
    before = resident_kib(pid)
    measured = 4000
    await edit_burst(session, measured, fresh_uris=True)
    await settle(session)
    after = resident_kib(pid)
    assert_server_healthy(client)
    growth_mib = (after - before) / 1024
    print(
        f"\nserver RSS: {before / 1024:.1f} MiB after 600 warm-up edits, "
        f"{after / 1024:.1f} MiB after {measured} more ({growth_mib:+.1f} MiB); "
        f"{session.requests} requests, {len(client.published)} publishes"
    )
    assert growth_mib < 30, f"RSS grew by {growth_mib:.1f} MiB over {measured} edits"
