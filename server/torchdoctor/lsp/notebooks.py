"""Jupyter notebooks in the editor (LSP 3.17 notebook document sync).

A notebook is analysed as one document: its Python cells joined in cell order
(analysis/notebook.py), kept in the server's DocumentStore under the notebook's URI, so the
scheduler, the code actions and the hovers work on it as on a file. Requests arrive for a cell's
URI: they are moved into the joined document's lines, and their answers moved back into the
cell's. Columns never change: every cell line is in the joined document as it is.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import attrs
from lsprotocol import types

from ..analysis import Config, Document, Edit, Finding, Span
from ..analysis.lines import LineIndex
from ..analysis.notebook import (
    CodeCell,
    NotebookProgram,
    analyse_notebook,
    fix_notebook,
    join_cells,
)
from ..analysis.notebook_prelude import probe_prelude
from ..analysis.rule_runner import InternalError
from .code_actions import StaleActionError
from .diagnostics import AnalysisResult, to_diagnostic, with_range
from .documents import OpenDocument
from .fix_all import minimal_replacement
from .positions import PositionMapper
from .rule_runs import run_rules

if TYPE_CHECKING:
    from .server import TorchDoctorServer

log = logging.getLogger("torchdoctor.lsp")

NOTEBOOK_TYPE = "jupyter-notebook"
SYNC_OPTIONS = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithCells(
            notebook=NOTEBOOK_TYPE, cells=[types.NotebookCellLanguage(language="python")]
        )
    ],
    save=True,
)


@dataclass
class NotebookCellText:
    uri: str
    kind: types.NotebookCellKind
    document: OpenDocument  # the cell's text and version, edited incrementally


@dataclass
class OpenNotebook:
    uri: str
    version: int
    cells: list[NotebookCellText] = field(default_factory=list)
    program: NotebookProgram = field(default_factory=lambda: join_cells([]))

    def code_cells(self) -> list[CodeCell]:
        return [
            CodeCell(number, cell.document.text)
            for number, cell in enumerate(self.cells, 1)
            if _is_python(cell)
        ]

    def rebuild(self) -> None:
        self.program = join_cells(self.code_cells())

    def cell_uri(self, number: int) -> str | None:
        return self.cells[number - 1].uri if 0 < number <= len(self.cells) else None

    def cell_number(self, uri: str) -> int | None:
        return next((n for n, cell in enumerate(self.cells, 1) if cell.uri == uri), None)

    def first_line(self, cell_uri: str) -> int | None:
        number = self.cell_number(cell_uri)
        placement = self.program.cell(number) if number is not None else None
        return placement.first_line if placement is not None else None


def _is_python(cell: NotebookCellText) -> bool:
    return cell.kind == types.NotebookCellKind.Code and cell.document.language_id == "python"


class NotebookStore:
    def __init__(self) -> None:
        self._notebooks: dict[str, OpenNotebook] = {}
        self._cells: dict[str, str] = {}  # cell URI -> notebook URI

    def get(self, uri: str) -> OpenNotebook | None:
        return self._notebooks.get(uri)

    def of_cell(self, cell_uri: str) -> OpenNotebook | None:
        notebook_uri = self._cells.get(cell_uri)
        return self._notebooks.get(notebook_uri) if notebook_uri is not None else None

    def open(self, params: types.DidOpenNotebookDocumentParams) -> OpenNotebook:
        texts = {item.uri: item for item in params.cell_text_documents}
        source = params.notebook_document
        notebook = OpenNotebook(source.uri, source.version)
        for cell in source.cells:
            item = texts.get(cell.document)
            notebook.cells.append(_cell(cell, item))
            self._cells[cell.document] = source.uri
        notebook.rebuild()
        self._notebooks[source.uri] = notebook
        return notebook

    def change(
        self, params: types.DidChangeNotebookDocumentParams, encoding: str
    ) -> OpenNotebook | None:
        notebook = self._notebooks.get(params.notebook_document.uri)
        if notebook is None:
            return None
        notebook.version = params.notebook_document.version
        changes = params.change.cells
        if changes is not None:
            self._apply(notebook, changes, encoding)
        notebook.rebuild()
        return notebook

    def _apply(
        self, notebook: OpenNotebook, changes: types.NotebookDocumentCellChanges, encoding: str
    ) -> None:
        structure = changes.structure
        if structure is not None:
            opened = {item.uri: item for item in structure.did_open or []}
            array = structure.array
            start = max(0, min(array.start, len(notebook.cells)))
            removed = notebook.cells[start : start + array.delete_count]
            kept = {cell.uri: cell for cell in removed}
            added = [
                kept.get(cell.document) or _cell(cell, opened.get(cell.document))
                for cell in array.cells or []
            ]
            notebook.cells[start : start + array.delete_count] = added
            for cell in removed:
                if cell.uri not in {new.uri for new in added}:
                    self._cells.pop(cell.uri, None)
            for cell in added:
                self._cells[cell.uri] = notebook.uri
        by_uri = {cell.uri: cell for cell in notebook.cells}
        for data in changes.data or []:
            if data.document in by_uri:
                by_uri[data.document].kind = data.kind
        for content in changes.text_content or []:
            edited = by_uri.get(content.document.uri)
            if edited is None:
                log.warning("an edit for %s, which is not in the notebook", content.document.uri)
                continue
            for change in content.changes:
                edited.document.apply(change, encoding)
            edited.document.version = content.document.version

    def close(self, uri: str) -> OpenNotebook | None:
        notebook = self._notebooks.pop(uri, None)
        if notebook is not None:
            for cell in notebook.cells:
                self._cells.pop(cell.uri, None)
        return notebook

    def __iter__(self) -> Iterator[OpenNotebook]:
        return iter(list(self._notebooks.values()))


def _cell(cell: types.NotebookCell, item: types.TextDocumentItem | None) -> NotebookCellText:
    text = item.text if item is not None else ""
    version = item.version if item is not None else 0
    language = item.language_id if item is not None else "python"
    return NotebookCellText(
        cell.document, cell.kind, OpenDocument(cell.document, text, version, language)
    )


# ---- analysis ----------------------------------------------------------------------------------
def analyse_notebook_version(
    *,
    uri: str,
    version: int,
    generation: int,
    cells: list[CodeCell],
    path: str,
    config: Config,
    encoding: str,
    locale: str,
    parse: Callable[[str, str], Document] = Document.parse,
) -> AnalysisResult:
    """As `diagnostics.analyse_version`, for a notebook's cells: the result is in the lines of
    the joined document, which the DocumentStore holds under the notebook's URI."""
    started = time.perf_counter()
    crashes: list[InternalError] = []

    def run(document: Document, run_config: Config) -> list[Finding]:
        findings, failed = run_rules(document, run_config)
        crashes.extend(crash for crash in failed if crash not in crashes)
        return findings

    analysis = analyse_notebook(cells, config, path, parse=parse, run=run)
    mapper = PositionMapper(analysis.document.index.lines, encoding)
    diagnostics = [to_diagnostic(finding, mapper, locale) for finding in analysis.findings]
    return AnalysisResult(
        uri,
        version,
        generation,
        analysis.document,
        analysis.findings,
        diagnostics,
        encoding,
        time.perf_counter() - started,
        tuple(crashes),
    )


# ---- positions: cell <-> joined document -------------------------------------------------------
def to_cell_range(notebook: OpenNotebook, value: types.Range) -> tuple[str, types.Range] | None:
    """The cell URI and the range in its lines (of a diagnostic, a hover, a lens). A range that
    runs into a later cell is cut at the end of its own cell. Edits: `cell_text_edit`."""
    located = notebook.program.locate(value.start.line)
    if located is None:
        # an insertion at the very end goes to the end of the last cell
        return _past_the_end(notebook, value)
    placement, line = located
    uri = notebook.cell_uri(placement.number)
    if uri is None:
        return None
    end = notebook.program.locate(value.end.line)
    end_position = types.Position(value.end.line - placement.first_line, value.end.character)
    if end is None or end[0] is not placement:
        last = max(placement.line_count - 1, 0)
        text = LineIndex.of(placement.python).line(last)
        end_position = types.Position(last, len(text.encode("utf-16-le", "surrogatepass")) // 2)
    return uri, types.Range(types.Position(line, value.start.character), end_position)


def _past_the_end(notebook: OpenNotebook, value: types.Range) -> tuple[str, types.Range] | None:
    program = notebook.program
    filled = [cell for cell in program.cells if cell.line_count]
    if not filled or value.start.line < program.line_count:
        return None
    last = filled[-1]
    uri = notebook.cell_uri(last.number)
    if uri is None or value.start != value.end:
        return None
    line = value.start.line - last.first_line
    return uri, types.Range(types.Position(line, 0), types.Position(line, 0))


def to_document_position(first_line: int, position: types.Position) -> types.Position:
    return types.Position(position.line + first_line, position.character)


def to_document_range(first_line: int, value: types.Range) -> types.Range:
    return types.Range(
        to_document_position(first_line, value.start), to_document_position(first_line, value.end)
    )


def cell_diagnostics(
    notebook: OpenNotebook, diagnostics: Iterable[types.Diagnostic]
) -> dict[str, list[types.Diagnostic]]:
    """Every Python cell's diagnostics (an empty list clears a cell's old ones)."""
    by_cell: dict[str, list[types.Diagnostic]] = {
        cell.uri: [] for cell in notebook.cells if _is_python(cell)
    }
    for diagnostic in diagnostics:
        moved = to_cell_range(notebook, diagnostic.range)
        if moved is None:
            continue
        uri, cell_range = moved
        by_cell.setdefault(uri, []).append(
            with_range(diagnostic, cell_range, _cell_fix_data(notebook, diagnostic.data, uri))
        )
    return by_cell


def _cell_fix_data(notebook: OpenNotebook, data: Any, uri: str) -> Any:
    """The diagnostic's fix data with its edits in the cell's lines; without the fix when an
    edit would land in another cell."""
    if not isinstance(data, dict) or not isinstance(data.get("fix"), dict):
        return data
    edits = []
    for edit in data["fix"].get("edits", []):
        raw = edit["range"]
        value = types.Range(
            types.Position(raw["start"]["line"], raw["start"]["character"]),
            types.Position(raw["end"]["line"], raw["end"]["character"]),
        )
        moved = cell_text_edit(notebook, types.TextEdit(value, edit["newText"]))
        if moved is None or moved[0] != uri:
            return {key: item for key, item in data.items() if key != "fix"}
        start, end = moved[1].range.start, moved[1].range.end
        edits.append(
            {
                "range": {
                    "start": {"line": start.line, "character": start.character},
                    "end": {"line": end.line, "character": end.character},
                },
                "newText": moved[1].new_text,
            }
        )
    return {**data, "fix": {**data["fix"], "edits": edits}}


def cell_workspace_edit(
    notebook: OpenNotebook, edit: types.WorkspaceEdit | None
) -> types.WorkspaceEdit | None:
    """A workspace edit of the joined document as edits of the cells; None when an edit would
    cross a cell boundary or touch an IPython line (it cannot be applied to any one cell)."""
    if edit is None:
        return None
    text_edits: list[types.TextEdit] = []
    versioned = edit.document_changes is not None
    for change in edit.document_changes or []:
        if isinstance(change, types.TextDocumentEdit) and change.text_document.uri == notebook.uri:
            text_edits.extend(e for e in change.edits if isinstance(e, types.TextEdit))
    for uri, edits in (edit.changes or {}).items():
        if uri == notebook.uri:
            text_edits.extend(edits)
    by_cell: dict[str, list[types.TextEdit]] = {}
    for text_edit in text_edits:
        moved = cell_text_edit(notebook, text_edit)
        if moved is None:
            return None
        by_cell.setdefault(moved[0], []).append(moved[1])
    if versioned:
        versions = {cell.uri: cell.document.version for cell in notebook.cells}
        return types.WorkspaceEdit(
            document_changes=[
                types.TextDocumentEdit(
                    types.OptionalVersionedTextDocumentIdentifier(uri, versions.get(uri)),
                    list(edits),
                )
                for uri, edits in by_cell.items()
            ]
        )
    return types.WorkspaceEdit(changes=by_cell)


def cell_text_edit(
    notebook: OpenNotebook, text_edit: types.TextEdit
) -> tuple[str, types.TextEdit] | None:
    """An edit of the joined document as the edit of one cell (the program decides, as for
    `check --fix`: same cell, no IPython line); None when no single cell can take it."""
    start, end = text_edit.range.start, text_edit.range.end
    edit = Edit(Span(start.line, start.character, end.line, end.character), text_edit.new_text)
    moved = notebook.program.edit_in_cell(edit)
    uri = notebook.cell_uri(moved[0]) if moved is not None else None
    if moved is None or uri is None:
        return None
    span = moved[1].span
    start_character, end_character = span.start_col, span.end_col
    if moved[1].content != edit.content:
        # appended after a last line without a line break: the column is that line's length,
        # which the client counts in its own units
        line = LineIndex.of(notebook.cells[moved[0] - 1].document.text).line(span.start_line)
        start_character = end_character = len(line.encode("utf-16-le", "surrogatepass")) // 2
    value = types.Range(
        types.Position(span.start_line, start_character),
        types.Position(span.end_line, end_character),
    )
    return uri, types.TextEdit(value, moved[1].content)


def fix_all_cell_edits(
    notebook: OpenNotebook, config: Config, path: str, encoding: str
) -> dict[str, list[types.TextEdit]]:
    """Fix-all for a notebook: every cell fixed as `check --fix` fixes it, as one minimal
    replacement per changed cell."""
    fixed = fix_notebook(notebook.code_cells(), config, path)
    edits: dict[str, list[types.TextEdit]] = {}
    for number, source in fixed.sources.items():
        cell = notebook.cells[number - 1]
        replacement = minimal_replacement(cell.document.text, source)
        if replacement is None:
            continue
        mapper = PositionMapper(LineIndex.of(cell.document.text).lines, encoding)
        edits[cell.uri] = [types.TextEdit(mapper.range(replacement.span), replacement.content)]
    return edits


# ---- the probe ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class NotebookProbe:
    source: str  # what the runner imports: the cells' definitions up to the class
    note: str  # for the report: what ran and what did not


def notebook_probe_source(
    notebooks: NotebookStore, uri: str, class_name: str
) -> NotebookProbe | None:
    """The probe's source for a class in a notebook; None when `uri` is not a notebook (or the
    class is not at the top level of one of its cells)."""
    notebook = notebooks.get(uri)
    if notebook is None:
        return None
    prelude = probe_prelude(notebook.program.text, class_name)
    if prelude is None:
        return None
    note = (
        f"Probed from a notebook: only the imports, function and class definitions and constant "
        f"assignments of the cells up to `{class_name}` ran ({prelude.kept} statements); "
        f"{prelude.skipped} other top-level statements (training, data loading, output) did not."
    )
    return NotebookProbe(prelude.text, note)


# ---- the LSP handlers ----------------------------------------------------------------------------
def register_notebook_features(server: TorchDoctorServer) -> None:
    """Notebook sync handlers, and the request handlers made to accept cell URIs."""

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def did_open(ls: TorchDoctorServer, params: types.DidOpenNotebookDocumentParams) -> None:
        notebook = ls.notebooks.open(params)
        _sync_document(ls, notebook, opening=True)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def did_change(ls: TorchDoctorServer, params: types.DidChangeNotebookDocumentParams) -> None:
        before = ls.notebooks.get(params.notebook_document.uri)
        old_cells = {cell.uri for cell in before.cells} if before is not None else set()
        notebook = ls.notebooks.change(params, ls.encoding)
        if notebook is None:
            return
        gone = old_cells - {cell.uri for cell in notebook.cells}
        if gone and not ls.pull_diagnostics:
            for uri in gone:  # removed cells take their squiggles with them
                ls.text_document_publish_diagnostics(
                    types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
                )
        _sync_document(ls, notebook)
        if ls.pull_diagnostics and ls.client_supports("workspace.diagnostics.refresh_support"):
            # an edit in one cell can change another's findings; a client pulls only the cells
            # it changed unless asked to pull again
            ls.workspace_diagnostic_refresh(None)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def did_save(ls: TorchDoctorServer, params: types.DidSaveNotebookDocumentParams) -> None:
        if ls.notebooks.get(params.notebook_document.uri) is not None and ls.settings.enable:
            ls.scheduler.request(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def did_close(ls: TorchDoctorServer, params: types.DidCloseNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        notebook = ls.notebooks.get(uri)
        if not ls.pull_diagnostics and notebook is not None:
            ls.publish(uri, [], None)  # clears every cell
        ls.notebooks.close(uri)
        ls.documents.close(uri)
        ls.scheduler.forget(uri)
        ls.probes.results.forget(uri)

    _accept_cells(server, types.TEXT_DOCUMENT_HOVER, _hover_params, _hover_answer)
    _accept_cells(server, types.TEXT_DOCUMENT_CODE_ACTION, _code_action_params, _actions_answer)
    _accept_cells(server, types.TEXT_DOCUMENT_CODE_LENS, _whole_cell_params, _lenses_answer)
    _accept_cells(server, types.TEXT_DOCUMENT_INLAY_HINT, _inlay_params, _hints_answer)
    _accept_cells(server, types.TEXT_DOCUMENT_DIAGNOSTIC, _whole_cell_params, _report_answer)
    _resolve_for_cells(server)
    _fix_all_command_for_cells(server)


def _sync_document(ls: TorchDoctorServer, notebook: OpenNotebook, opening: bool = False) -> None:
    """The joined document under the notebook's URI, as the rest of the server reads it."""
    document = ls.documents.get(notebook.uri)
    if document is None or opening:
        ls.documents.open(
            types.TextDocumentItem(notebook.uri, "python", notebook.version, notebook.program.text)
        )
    else:
        document.apply(types.TextDocumentContentChangeWholeDocument(notebook.program.text), "")
        document.version = notebook.version
    if ls.settings.enable:
        ls.scheduler.request(notebook.uri)


def publish_cells(ls: TorchDoctorServer, uri: str, diagnostics: list[types.Diagnostic]) -> bool:
    """Publish a notebook's diagnostics to its cells; False when `uri` is not a notebook."""
    notebook = ls.notebooks.get(uri)
    if notebook is None:
        return False
    for cell_uri, items in cell_diagnostics(notebook, diagnostics).items():
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=cell_uri, diagnostics=items)
        )
    return True


# a request for a cell: (the notebook, the cell's first line, the cell URI)
CellRequest = tuple[OpenNotebook, int, str]
Translate = Callable[[Any, OpenNotebook, int], Any]
Answer = Callable[[Any, "CellRequest", "TorchDoctorServer"], Any]


def _accept_cells(
    server: TorchDoctorServer, method: str, translate: Translate, answer: Answer
) -> None:
    features = server.protocol.fm.features
    original = features.get(method)
    if original is None:
        return

    async def for_cells(params: Any) -> Any:
        notebook = server.notebooks.of_cell(params.text_document.uri)
        first = notebook.first_line(params.text_document.uri) if notebook else None
        if notebook is None or first is None:
            result = original(params)
            return await result if inspect.isawaitable(result) else result
        cell_uri = params.text_document.uri
        result = original(translate(params, notebook, first))
        result = await result if inspect.isawaitable(result) else result
        answered = answer(result, (notebook, first, cell_uri), server)
        return await answered if inspect.isawaitable(answered) else answered

    features[method] = for_cells


def _identifier(notebook: OpenNotebook) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(notebook.uri)


def _hover_params(params: types.HoverParams, notebook: OpenNotebook, first: int) -> Any:
    return types.HoverParams(_identifier(notebook), to_document_position(first, params.position))


def _whole_cell_params(params: Any, notebook: OpenNotebook, first: int) -> Any:
    moved = type(params)(**{**_fields(params), "text_document": _identifier(notebook)})
    return moved


def _inlay_params(params: types.InlayHintParams, notebook: OpenNotebook, first: int) -> Any:
    return types.InlayHintParams(_identifier(notebook), to_document_range(first, params.range))


def _code_action_params(
    params: types.CodeActionParams, notebook: OpenNotebook, first: int
) -> types.CodeActionParams:
    context = types.CodeActionContext(
        diagnostics=[
            with_range(d, to_document_range(first, d.range), d.data)
            for d in params.context.diagnostics
        ],
        only=params.context.only,
        trigger_kind=params.context.trigger_kind,
    )
    return types.CodeActionParams(
        _identifier(notebook), to_document_range(first, params.range), context
    )


def _fields(value: Any) -> dict[str, Any]:
    return {field.name: getattr(value, field.name) for field in attrs.fields(type(value))}


def _in_cell(notebook: OpenNotebook, value: types.Range, cell_uri: str) -> types.Range | None:
    moved = to_cell_range(notebook, value)
    return moved[1] if moved is not None and moved[0] == cell_uri else None


def _hover_answer(result: Any, request: CellRequest, ls: TorchDoctorServer) -> Any:
    notebook, _, cell_uri = request
    if result is None or result.range is None:
        return result
    value = _in_cell(notebook, result.range, cell_uri)
    return types.Hover(contents=result.contents, range=value)


def _lenses_answer(result: Any, request: CellRequest, ls: TorchDoctorServer) -> Any:
    notebook, _, cell_uri = request
    lenses = []
    for lens in result or []:
        value = _in_cell(notebook, lens.range, cell_uri)
        if value is not None:
            lenses.append(types.CodeLens(range=value, command=lens.command, data=lens.data))
    return lenses or None


def _hints_answer(result: Any, request: CellRequest, ls: TorchDoctorServer) -> Any:
    notebook, first, cell_uri = request
    hints = []
    for hint in result or []:
        position = hint.position
        value = _in_cell(notebook, types.Range(position, position), cell_uri)
        if value is not None:
            hints.append(type(hint)(**{**_fields(hint), "position": value.start}))
    return hints


def _report_answer(result: Any, request: CellRequest, ls: TorchDoctorServer) -> Any:
    notebook, _, cell_uri = request
    if not isinstance(result, types.RelatedFullDocumentDiagnosticReport):
        return result
    items = cell_diagnostics(notebook, result.items).get(cell_uri, [])
    return types.RelatedFullDocumentDiagnosticReport(items=items, result_id=result.result_id)


async def _actions_answer(result: Any, request: CellRequest, ls: TorchDoctorServer) -> Any:
    notebook, _, cell_uri = request
    actions = []
    for action in result or []:
        moved = await _cell_action(ls, notebook, action)
        if moved is not None:
            actions.append(moved)
    return actions or None


async def _cell_action(
    ls: TorchDoctorServer, notebook: OpenNotebook, action: types.CodeAction
) -> types.CodeAction | None:
    data = action.data if isinstance(action.data, dict) else {}
    if action.diagnostics:
        by_cell = cell_diagnostics(notebook, action.diagnostics)
        action.diagnostics = [d for items in by_cell.values() for d in items]
    if action.edit is None:
        return action  # resolved lazily: `codeAction/resolve` moves the edit
    if data.get("action") == "fixAll":
        action.edit = await _fix_all_edit(ls, notebook)
        return action
    action.edit = cell_workspace_edit(notebook, action.edit)
    return action if action.edit is not None else None


async def _fix_all_edit(ls: TorchDoctorServer, notebook: OpenNotebook) -> types.WorkspaceEdit:
    document = ls.documents.get(notebook.uri)
    config = ls.config_for(document) if document is not None else Config()
    path = (document.path if document is not None else None) or notebook.uri
    # fixing re-analyses the cells: off the event loop, as for files
    edits = await asyncio.get_running_loop().run_in_executor(
        ls.analysis_pool, fix_all_cell_edits, notebook, config, path, ls.encoding
    )
    if ls.edit_support.document_changes:
        versions = {cell.uri: cell.document.version for cell in notebook.cells}
        return types.WorkspaceEdit(
            document_changes=[
                types.TextDocumentEdit(
                    types.OptionalVersionedTextDocumentIdentifier(uri, versions.get(uri)), items
                )
                for uri, items in edits.items()
            ]
        )
    return types.WorkspaceEdit(changes=edits)


def _resolve_for_cells(server: TorchDoctorServer) -> None:
    """`codeAction/resolve` carries the notebook's URI in its data: the edit it resolves is
    moved into the cells."""
    features = server.protocol.fm.features
    original = features.get(types.CODE_ACTION_RESOLVE)
    if original is None:
        return

    async def resolve(params: types.CodeAction) -> types.CodeAction:
        data = params.data if isinstance(params.data, dict) else {}
        notebook = server.notebooks.get(str(data.get("uri")))
        if notebook is not None and data.get("action") == "fixAll":
            # the notebook's own fix-all (cell by cell), not the joined document's
            if data.get("version") != notebook.version:
                raise StaleActionError("the notebook changed since the action was offered")
            params.edit = await _fix_all_edit(server, notebook)
            return params
        result = original(params)
        # the server's own `codeAction/resolve` (features.py) answers a CodeAction
        action: types.CodeAction = await result if inspect.isawaitable(result) else result
        if notebook is not None:
            action.edit = cell_workspace_edit(notebook, action.edit) or types.WorkspaceEdit()
        return action

    features[types.CODE_ACTION_RESOLVE] = resolve


def _fix_all_command_for_cells(server: TorchDoctorServer) -> None:
    """The "fix all" command, sent with the URI of the cell the editor shows (or of the
    notebook): every cell is fixed as `check --fix` fixes the notebook."""
    from .commands import FIX_ALL_SERVER_COMMAND  # commands.py imports this module

    commands = server.protocol.fm.commands
    original = commands.get(FIX_ALL_SERVER_COMMAND)
    if original is None:
        return

    async def fix_all(*arguments: Any) -> Any:
        value = arguments[0] if len(arguments) == 1 else None
        uri = value.get("uri") if isinstance(value, dict) else value
        notebook = None
        if isinstance(uri, str):
            notebook = server.notebooks.get(uri) or server.notebooks.of_cell(uri)
        if notebook is None:
            return await original(*arguments)
        edit = await _fix_all_edit(server, notebook)
        if not (edit.changes or edit.document_changes):
            return {"applied": False, "reason": "nothing to fix"}
        answer = await server.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(edit=edit, label="torchdoctor: fix all")
        )
        return {"applied": bool(answer.applied), "reason": answer.failure_reason}

    commands[FIX_ALL_SERVER_COMMAND] = fix_all
