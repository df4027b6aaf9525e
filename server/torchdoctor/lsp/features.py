"""The LSP handlers: each one translates a request into calls on the server object and the
feature modules, and the answer back into lsprotocol types."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from functools import partial

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from ..analysis import Config, Span
from . import code_actions
from .code_lens import probe_lenses
from .commands import register_commands
from .diagnostics import AnalysisResult
from .hover import (
    SEPARATOR,
    api_markdown,
    as_plain_text,
    findings_markdown,
    probe_modules_markdown,
)
from .inlay_hints import inlay_hints
from .local_shape_features import local_hover_markdown, with_local_shapes
from .probe_results import LineAnchors
from .server import TorchDoctorServer
from .settings import SECTION, parse_settings
from .torch_names import api_at

log = logging.getLogger("torchdoctor.lsp")

# A hover waits this long for the analysis of the text it points at, and this long for jedi
# once jedi is warm; past either it answers with what it has.
HOVER_ANALYSIS_WAIT = 2.0
HOVER_JEDI_WAIT = 0.4
# A line that builds a library block (nn.TransformerEncoder) carries all its inner layers
PROBE_HOVER_ROWS = 6


def register_features(server: TorchDoctorServer) -> None:
    @server.feature(types.INITIALIZE)
    def initialize(ls: TorchDoctorServer, params: types.InitializeParams) -> None:
        ls.learn_client(params)
        options = params.initialization_options
        if isinstance(options, Mapping) and "settings" in options:
            parsed = parse_settings(options.get("settings"))
            ls.settings = parsed.settings
            ls.pending_problems = parsed.problems  # shown once the client is initialised

    @server.feature(types.INITIALIZED)
    def initialized(ls: TorchDoctorServer, params: types.InitializedParams) -> None:
        if ls.pending_problems:
            heading = "torchdoctor: problems in the initialization settings"
            ls.show_problems(heading, ls.pending_problems)
            ls.pending_problems = ()
        # the round trips to the client run as a task of their own: a notification handler
        # that waits on the client would be cancelled noisily if the client quits meanwhile
        ls.run_in_background(_after_initialized(ls))

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: TorchDoctorServer, params: None) -> None:
        ls.shutdown_requested = True
        ls.jedi.shutdown()
        await ls.probes.runner.close()  # the warm workers go with the server

    @server.feature(types.EXIT)
    def exit_(ls: TorchDoctorServer, params: None) -> None:
        ls.exit_received = True

    # ---- documents -------------------------------------------------------------------------
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TorchDoctorServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.documents.open(params.text_document)
        if ls.settings.enable:
            ls.scheduler.request(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TorchDoctorServer, params: types.DidChangeTextDocumentParams) -> None:
        if ls.documents.change(params, ls.encoding) is not None and ls.settings.enable:
            ls.scheduler.request(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: TorchDoctorServer, params: types.DidSaveTextDocumentParams) -> None:
        # the text is unchanged, but a saved pyproject.toml may have changed the configuration
        if ls.documents.get(params.text_document.uri) is not None and ls.settings.enable:
            ls.scheduler.request(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TorchDoctorServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.documents.close(uri)
        ls.scheduler.forget(uri)
        ls.early_sent.pop(uri, None)  # the client drops what it showed
        ls.probes.results.forget(uri)
        if not ls.pull_diagnostics:
            ls.publish(uri, [], None)

    # ---- diagnostics (pull) ----------------------------------------------------------------
    @server.feature(
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.DiagnosticOptions(
            identifier="torchdoctor", inter_file_dependencies=False, workspace_diagnostics=False
        ),
    )
    async def pull_diagnostics(
        ls: TorchDoctorServer, params: types.DocumentDiagnosticParams
    ) -> types.DocumentDiagnosticReport:
        uri = params.text_document.uri
        if not ls.settings.enable:
            return types.RelatedFullDocumentDiagnosticReport(items=[], result_id="off")
        result = await ls.scheduler.current(uri)
        if result is None:
            return types.RelatedFullDocumentDiagnosticReport(items=[])
        # a new probe report changes the diagnostics of an unchanged text
        result_id = f"{result.result_id}.p{ls.probes.generation}"
        if params.previous_result_id == result_id:
            return types.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
        diagnostics = ls.diagnostics_of(result)
        early = ls.early_sent.get(uri)
        if early is not None:
            if early.result_id == params.previous_result_id and ls.shown_early(result, diagnostics):
                return types.RelatedUnchangedDocumentDiagnosticReport(result_id=early.result_id)
            del ls.early_sent[uri]  # the client gets the server's own from now on
        return types.RelatedFullDocumentDiagnosticReport(items=diagnostics, result_id=result_id)

    # ---- hover -----------------------------------------------------------------------------
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: TorchDoctorServer, params: types.HoverParams) -> types.Hover | None:
        if not ls.settings.enable:
            return None
        try:
            result = await asyncio.wait_for(
                ls.scheduler.current(params.text_document.uri), HOVER_ANALYSIS_WAIT
            )
        except asyncio.TimeoutError:
            return None
        if result is None:
            return None
        mapper = result.mapper
        line, col = mapper.to_char(params.position)
        probed = _probed_modules(ls, result, line)
        under = [f for f in result.findings if _under(f.span, line, col)]
        if under:
            text = _joined(findings_markdown(under, ls.locale), probed)
            return _hover(ls, text, mapper.range(under[0].span)) if text else None
        outline = await ls.outline_of(result)
        target = api_at(result.document, outline.imports, line, col)
        if target is None:
            local = local_hover_markdown(ls.probes.results, result, line, col)
            text = _joined(local, probed)
            return _hover(ls, text, _line_range(result, line)) if text else None
        doc = None
        if target.describe and ls.settings.hover_signatures:
            doc = ls.jedi.cached(target.describe) or await ls.jedi.describe(
                target.describe, HOVER_JEDI_WAIT
            )
        text = _joined(api_markdown(target, ls.locale, doc), probed)
        return _hover(ls, text, mapper.range(target.span)) if text else None

    # ---- code actions ----------------------------------------------------------------------
    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=code_actions.ACTION_KINDS, resolve_provider=True),
    )
    async def code_action(
        ls: TorchDoctorServer, params: types.CodeActionParams
    ) -> list[types.CodeAction] | None:
        if not ls.settings.enable:
            return None
        result = await ls.scheduler.current(params.text_document.uri)
        if result is None:
            return None
        document = ls.documents.get(result.uri)
        # no document: the engine's defaults, as `analyse` takes for a config of None
        config = ls.config_for(document) if document is not None else Config()
        job = partial(
            code_actions.code_actions,
            result,
            params,
            config=config,
            support=ls.edit_support,
            locale=ls.locale,
        )
        # fix-all re-analyses the fixed text: keep that off the event loop
        actions = await asyncio.get_running_loop().run_in_executor(ls.analysis_pool, job)
        return actions or None

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def resolve_code_action(
        ls: TorchDoctorServer, params: types.CodeAction
    ) -> types.CodeAction:
        data = params.data if isinstance(params.data, Mapping) else {}
        uri = data.get("uri")
        if not isinstance(uri, str):
            raise JsonRpcInvalidParams("this code action was not made by torchdoctor (no data)")
        result = await ls.scheduler.current(uri)
        document = ls.documents.get(uri)
        if result is None or document is None:
            raise code_actions.StaleActionError(f"{uri} is not open any more")
        job = partial(
            code_actions.resolve_action,
            result,
            params,
            config=ls.config_for(document),
            support=ls.edit_support,
        )
        return await asyncio.get_running_loop().run_in_executor(ls.analysis_pool, job)

    # ---- CodeLens --------------------------------------------------------------------------
    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))
    async def code_lens(
        ls: TorchDoctorServer, params: types.CodeLensParams
    ) -> list[types.CodeLens] | None:
        if not (ls.settings.enable and ls.settings.code_lens):
            return None
        result = await ls.scheduler.current(params.text_document.uri)
        if result is None:
            return None
        outline = await ls.outline_of(result)
        snapshot = ls.probes.results.get(result.uri)
        probed = None
        if snapshot is not None:
            stale = snapshot.lines != result.document.index.lines
            probed = (snapshot.class_name, snapshot.report, stale)
        return probe_lenses(result.uri, outline, result.mapper, ls.locale, probed)

    # ---- inlay hints (from the last probe) ---------------------------------------------------
    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
    async def inlay_hint(
        ls: TorchDoctorServer, params: types.InlayHintParams
    ) -> list[types.InlayHint] | None:
        if not (ls.settings.enable and ls.settings.inlay_hints):
            return None
        snapshot = ls.probes.results.get(params.text_document.uri)
        if snapshot is None and not ls.probes.results.all():
            return None
        result = await ls.scheduler.current(params.text_document.uri)
        if result is None:
            return None
        hints = inlay_hints(snapshot, result, params.range, ls.locale) if snapshot else []
        return with_local_shapes(
            hints, ls.probes.results, result, params.range, ls.settings.shape_hints, ls.locale
        )

    # ---- cancelling the probe from the progress notification ---------------------------------
    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def work_done_progress_cancel(
        ls: TorchDoctorServer, params: types.WorkDoneProgressCancelParams
    ) -> None:
        ls.probes.cancel_progress(params.token)

    # ---- settings and configuration files --------------------------------------------------
    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: TorchDoctorServer, params: types.DidChangeConfigurationParams
    ) -> None:
        if ls.client_supports("workspace.configuration"):
            await _pull_settings(ls)
            return
        settings = params.settings
        if isinstance(settings, Mapping) and SECTION in settings:
            ls.apply_settings(parse_settings(settings[SECTION]), "editor")

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(
        ls: TorchDoctorServer, params: types.DidChangeWatchedFilesParams
    ) -> None:
        ls.project_configs.clear()
        ls.settings_changed(ls.settings)

    register_commands(server)


async def _after_initialized(ls: TorchDoctorServer) -> None:
    await _register_dynamic_capabilities(ls)
    if ls.client_supports("workspace.configuration"):
        await _pull_settings(ls)
    ls.start_jedi()


async def _register_dynamic_capabilities(ls: TorchDoctorServer) -> None:
    registrations: list[types.Registration] = []
    if ls.client_supports("workspace.did_change_configuration.dynamic_registration"):
        registrations.append(
            types.Registration(
                id="torchdoctor-configuration",
                method=types.WORKSPACE_DID_CHANGE_CONFIGURATION,
                register_options=types.DidChangeConfigurationRegistrationOptions(section=SECTION),
            )
        )
    if ls.client_supports("workspace.did_change_watched_files.dynamic_registration"):
        registrations.append(
            types.Registration(
                id="torchdoctor-pyproject",
                method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=types.DidChangeWatchedFilesRegistrationOptions(
                    watchers=[types.FileSystemWatcher(glob_pattern="**/pyproject.toml")]
                ),
            )
        )
    if not registrations:
        return
    try:
        await ls.client_register_capability_async(types.RegistrationParams(registrations))
    except Exception as error:  # the client said it could; if not, settings still work on pull
        log.warning("the client refused dynamic registration: %s", error)


async def _pull_settings(ls: TorchDoctorServer) -> None:
    item = types.ConfigurationItem(section=SECTION, scope_uri=ls.root_uri)
    try:
        answer = await ls.workspace_configuration_async(types.ConfigurationParams(items=[item]))
    except Exception as error:
        log.warning("workspace/configuration failed: %s", error)
        return
    raw = answer[0] if answer else None
    if raw is None:
        return  # nothing configured in the editor: keep the initialization settings
    ls.apply_settings(parse_settings(raw), "editor")


def _under(span: Span, line: int, col: int) -> bool:
    return (span.start_line, span.start_col) <= (line, col) < (span.end_line, span.end_col)


def _probed_modules(ls: TorchDoctorServer, result: AnalysisResult, line: int) -> str | None:
    """The last probe's numbers for the submodules declared on `line` (`self.conv1 = ...`)."""
    snapshot = ls.probes.results.get(result.uri)
    if snapshot is None:
        return None
    anchors = LineAnchors(snapshot.lines, result.document.index.lines)
    rows = [
        row
        for row in snapshot.module_rows()
        if row.name and row.line is not None and anchors.find(row.line - 1) == line
    ]
    if not rows:
        return None
    shallowest = min(row.depth for row in rows)
    rows = [row for row in rows if row.depth == shallowest][:PROBE_HOVER_ROWS]
    return probe_modules_markdown(rows, anchors.stale)


def _joined(*parts: str | None) -> str | None:
    present = [part for part in parts if part]
    return SEPARATOR.join(present) if present else None


def _line_range(result: AnalysisResult, line: int) -> types.Range:
    text = result.document.index.line(line)
    start = len(text) - len(text.lstrip())
    return result.mapper.range(Span(line, start, line, len(text)))


def _hover(ls: TorchDoctorServer, markdown: str, range_: types.Range) -> types.Hover:
    formats = ls.client_capabilities.text_document
    hover_formats = formats.hover.content_format if formats and formats.hover else None
    if hover_formats and types.MarkupKind.Markdown not in hover_formats:
        content = types.MarkupContent(types.MarkupKind.PlainText, as_plain_text(markdown))
    else:
        content = types.MarkupContent(types.MarkupKind.Markdown, markdown)
    return types.Hover(contents=content, range=range_)
