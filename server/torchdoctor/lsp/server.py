"""The server object: its state (open documents, settings, analysis results) and how results reach
the client. The LSP handlers that drive it are in features.py; `serve` starts it."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

from lsprotocol import types
from pygls.capabilities import ServerCapabilitiesBuilder
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer

from .. import __version__
from ..analysis import Config, ConfigError
from ..analysis.rule_runner import InternalError
from ..docs import normalise_locale
from .code_actions import EditSupport
from .columns import UTF16
from .diagnostics import AnalysisResult, analyse_version
from .documents import DocumentStore, OpenDocument
from .early_start import SentDiagnostics
from .jedi_support import JediState, JediSupport
from .notebooks import SYNC_OPTIONS as NOTEBOOK_SYNC
from .notebooks import NotebookStore, analyse_notebook_version, publish_cells
from .outline import Outline, build_outline
from .pitfall_notes import NOTES
from .probe_format import size as byte_size
from .probe_state import ProbeState
from .project_config import ProjectConfigs, editor_config
from .protocol import TorchDoctorProtocol
from .rule_runs import LARGE_DOCUMENT_BYTES
from .runtime_diagnostics import runtime_diagnostics
from .scheduler import AnalysisJob, AnalysisScheduler
from .settings import ParsedSettings, Settings
from .transport import Takeover, serve_messages, stream_chunks, take_over
from .uris import workspace_root

log = logging.getLogger("torchdoctor.lsp")

ANALYSIS_THREADS = 2  # analyses of different documents may overlap; one document never does


class TorchDoctorServer(LanguageServer):
    protocol: TorchDoctorProtocol

    def __init__(self) -> None:
        super().__init__(
            "torchdoctor",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=NOTEBOOK_SYNC,
            protocol_cls=TorchDoctorProtocol,
        )
        self.documents = DocumentStore()
        self.notebooks = NotebookStore()  # their joined cells are in `documents` too
        self.project_configs = ProjectConfigs()
        self.jedi = JediSupport()
        self.probes = ProbeState()  # warm probe workers and the last report per document
        self.settings = Settings()
        self.pending_problems: tuple[str, ...] = ()  # from initializationOptions
        self.client_locale: str | None = None
        self.root_path: str | None = None
        self.root_uri: str | None = None
        self.encoding = UTF16
        self.pull_diagnostics = False
        # the diagnostics the early front sent (early_start.py), until this server has its own
        self.early_sent: dict[str, SentDiagnostics] = {}
        self.edit_support = EditSupport(document_changes=False, lazy=False)
        self.generation = 0  # bumped whenever settings change what an analysis produces
        self.shutdown_requested = False
        self.exit_received = False
        self._sequence = 0
        self._shown_problems: set[str] = set()
        self._reported_crashes: set[str] = set()  # codes of the rules the user was told crashed
        # pyproject.toml files shown as not parsing → the diagnostic's message
        self._config_errors: dict[Path, str] = {}
        self._background: set[asyncio.Task[None]] = set()
        self.analysis_pool = ThreadPoolExecutor(ANALYSIS_THREADS, thread_name_prefix="analysis")
        self.large_analysis_pool = ThreadPoolExecutor(1, thread_name_prefix="large-analysis")
        self.scheduler = AnalysisScheduler(
            executor=self.analysis_pool,
            large_executor=self.large_analysis_pool,
            prepare=self._prepare_analysis,
            is_current=self._is_current,
            on_result=self._on_result,
        )

    # ---- client facts ----------------------------------------------------------------------
    def learn_client(self, params: types.InitializeParams) -> None:
        capabilities = params.capabilities
        self.client_locale = params.locale
        encoding = ServerCapabilitiesBuilder.choose_position_encoding(capabilities)
        self.encoding = str(getattr(encoding, "value", encoding))
        text_document = capabilities.text_document
        self.pull_diagnostics = bool(text_document and text_document.diagnostic is not None)
        self.edit_support = EditSupport.of(capabilities)
        folders = params.workspace_folders or []
        self.root_uri, self.root_path = workspace_root(
            params.root_uri, folders[0].uri if folders else None, params.root_path
        )

    def client_supports(self, path: str) -> bool:
        """A capability flag by dotted path, e.g. "workspace.configuration"."""
        value: Any = self.client_capabilities
        for part in path.split("."):
            value = getattr(value, part, None)
            if value is None:
                return False
        return bool(value)

    @property
    def locale(self) -> str:
        if self.settings.locale != "auto":
            return self.settings.locale
        return normalise_locale(self.client_locale)

    # ---- settings --------------------------------------------------------------------------
    def apply_settings(self, parsed: ParsedSettings, source: str) -> None:
        """Take new settings; tell the user what was wrong with them; re-analyse if needed."""
        if parsed.problems:
            self.show_problems(f"torchdoctor: problems in the {source} settings", parsed.problems)
        if parsed.settings == self.settings:
            return
        previous, self.settings = self.settings, parsed.settings
        log.info("settings from %s: %s", source, self.settings)
        self.settings_changed(previous)

    def settings_changed(self, previous: Settings | None = None) -> None:
        self.generation += 1
        if not self.settings.enable and not self.pull_diagnostics:
            for document in self.documents:
                self.publish(document.uri, [], None)
        self.reanalyse_all()
        if self.pull_diagnostics and self.client_supports("workspace.diagnostics.refresh_support"):
            self.workspace_diagnostic_refresh(None)
        if self.client_supports("workspace.code_lens.refresh_support"):
            self.workspace_code_lens_refresh(None)
        if previous is None or (
            previous.interpreter,
            previous.hover_signatures,
        ) != (self.settings.interpreter, self.settings.hover_signatures):
            self.start_jedi()

    def reanalyse_all(self) -> None:
        if not self.settings.enable:
            return
        for document in self.documents:
            self.scheduler.request(document.uri)

    def show_problems(self, heading: str, problems: tuple[str, ...] | list[str]) -> None:
        """One message per distinct set of problems: a setting stays wrong until fixed, and
        repeating the message on every change would only bury it."""
        text = f"{heading}:\n" + "\n".join(f"- {problem}" for problem in problems)
        log.warning("%s", text)
        if text in self._shown_problems:
            return
        self._shown_problems.add(text)
        self.window_show_message(types.ShowMessageParams(types.MessageType.Warning, text))

    def report_internal_errors(self, crashes: tuple[InternalError, ...]) -> None:
        """A crashed rule is logged where it ran; the user is told once per rule, not on every
        keystroke of every file it crashes on."""
        for crash in crashes:
            if crash.code in self._reported_crashes:
                log.debug("%s", crash.describe())
                continue
            self._reported_crashes.add(crash.code)
            log.error("%s\n%s", crash.describe(), crash.traceback)
            text = f"torchdoctor: {crash.describe()} (see the server log)"
            self.window_show_message(types.ShowMessageParams(types.MessageType.Error, text))

    def show_config_error(self, error: ConfigError | None) -> None:
        """A pyproject.toml that does not parse: a diagnostic at the line in that file (beside
        the window message of `config_for`), taken away once the file parses again. Published
        when it changes, not on every analysis."""
        if error is not None and error.path is not None:
            if self._config_errors.get(error.path) != error.reason:
                self._config_errors[error.path] = error.reason
                self.publish(error.path.as_uri(), [config_diagnostic(error)], None)
        for path in list(self._config_errors):
            if error is not None and path == error.path:
                continue
            # another folder's file: re-read only when it changed (the cache checks mtimes)
            still = self.project_configs.for_file(None, str(path.parent)).error
            if still is None or still.path != path:
                del self._config_errors[path]
                self.publish(path.as_uri(), [], None)

    def config_for(self, document: OpenDocument) -> Config:
        loaded = self.project_configs.for_file(document.path, self.root_path)
        project = loaded.config
        self.show_config_error(loaded.error)
        if project.warnings:
            self.show_problems("torchdoctor: problems in [tool.torchdoctor]", project.warnings)
        return editor_config(project, self.settings)

    # ---- analysis --------------------------------------------------------------------------
    def _prepare_analysis(self, uri: str) -> AnalysisJob | None:
        document = self.documents.get(uri)
        if document is None or not self.settings.enable:
            return None
        size = document.utf8_size()
        limit = self.settings.max_document_size
        if limit and size > limit:
            self._skip_too_large(document, size, limit)
            return None
        document.told_too_large = False
        notebook = self.notebooks.get(uri)
        if notebook is not None:
            return AnalysisJob(
                partial(
                    analyse_notebook_version,
                    uri=uri,
                    version=document.version,
                    generation=self.generation,
                    cells=notebook.code_cells(),
                    path=document.path or uri,
                    parse=document.analyser.parse,
                    config=self.config_for(document),
                    encoding=self.encoding,
                    locale=self.locale,
                ),
                large=size >= LARGE_DOCUMENT_BYTES,
            )
        run = partial(
            analyse_version,
            uri=uri,
            version=document.version,
            generation=self.generation,
            text=document.text,
            path=document.path or uri,
            # redoes only what an edit changed (exactly equal to a full analysis)
            analyser=document.analyser,
            converted=document.converted,
            config=self.config_for(document),
            encoding=self.encoding,
            locale=self.locale,
        )
        return AnalysisJob(run, large=size >= LARGE_DOCUMENT_BYTES)

    def _skip_too_large(self, document: OpenDocument, size: int, limit: int) -> None:
        """No analysis (parsing alone would hold the server for seconds): one message per
        document, and the diagnostics of its last smaller version are taken away."""
        if document.told_too_large:
            return
        document.told_too_large = True
        name = Path(document.path).name if document.path else document.uri
        text = (
            f"torchdoctor does not analyse {name}: it is {byte_size(size)}, over the "
            f"{byte_size(limit)} limit of the setting torchdoctor.maxDocumentSize"
        )
        log.warning("%s", text)
        self.window_show_message(types.ShowMessageParams(types.MessageType.Info, text))
        if not self.pull_diagnostics:
            self.publish(document.uri, [], document.version)

    def _is_current(self, result: AnalysisResult) -> bool:
        document = self.documents.get(result.uri)
        return (
            document is not None
            and document.version == result.version
            and result.generation == self.generation
        )

    def _on_result(self, result: AnalysisResult) -> None:
        self._sequence += 1
        result.result_id = f"{result.generation}.{result.version}.{self._sequence}"
        log.debug(
            "%s v%s: %d findings in %.1f ms",
            result.uri,
            result.version,
            len(result.findings),
            result.seconds * 1000,
        )
        self.report_internal_errors(result.internal_errors)
        if not self.pull_diagnostics:
            self.publish_result(result)

    def diagnostics_of(self, result: AnalysisResult) -> list[types.Diagnostic]:
        """The analysis' diagnostics and, for a probed document, the probe's runtime ones."""
        snapshot = self.probes.results.get(result.uri)
        document = self.documents.get(result.uri)
        if snapshot is None or document is None:
            return result.diagnostics
        config = self.config_for(document)
        return result.diagnostics + runtime_diagnostics(snapshot, result, config, self.locale)

    def publish_result(self, result: AnalysisResult) -> None:
        """The result's diagnostics; sent as JSON made once per finding when nothing is added
        to them (serialising 500 diagnostics with the protocol's converter costs 30 ms)."""
        diagnostics = self.diagnostics_of(result)
        raw = result.diagnostics_json
        if self.shown_early(result, diagnostics):
            return  # the same again would only make the client redraw them
        notebook = self.notebooks.get(result.uri) is not None
        if raw is None or diagnostics is not result.diagnostics or notebook:
            self.publish(result.uri, diagnostics, result.version)
            return
        head = json.dumps(
            {
                "jsonrpc": "2.0",
                "method": types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
                "params": {"uri": result.uri, "version": result.version},
            },
            separators=(",", ":"),
        )
        # the diagnostics' own JSON, made once per finding, spliced into the message
        body = f'{head[:-2]},"diagnostics":[{",".join(raw)}]}}}}'
        self.protocol.send_json_text(body)

    def shown_early(self, result: AnalysisResult, diagnostics: list[types.Diagnostic]) -> bool:
        """Whether the client shows these diagnostics of the result's version already, sent by
        the early front. Pushed, only a document's first result is compared (after it the
        client has the server's own); pulled, every pull that names the front's result id,
        until one gets a report of the server's (`pull_diagnostics` in features.py)."""
        sent = self.early_sent.get(result.uri)
        if sent is None:
            return False
        if not self.pull_diagnostics:
            del self.early_sent[result.uri]  # pushed: this result is the server's own from now
        raw = result.diagnostics_json
        return (
            sent.version == result.version
            and diagnostics is result.diagnostics
            and raw is not None
            and tuple(raw) == sent.items
        )

    def publish(self, uri: str, diagnostics: list[types.Diagnostic], version: int | None) -> None:
        if publish_cells(self, uri, diagnostics):
            return  # a notebook: each cell gets its own
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
        )

    async def outline_of(self, result: AnalysisResult) -> Outline:
        """Imports and nn.Module classes of the result's version, computed once, off the loop."""
        if result.outline is None:
            loop = asyncio.get_running_loop()
            result.outline = await loop.run_in_executor(
                self.analysis_pool, build_outline, result.document
            )
        return result.outline

    def run_in_background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` as a task the server keeps a reference to; its failure is logged."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background work failed", exc_info=task.exception())

    # ---- jedi ------------------------------------------------------------------------------
    def start_jedi(self) -> None:
        if not self.settings.hover_signatures:
            self.jedi.stop()
            return
        future = self.jedi.start(self.settings.interpreter, self.root_path)
        if future is not None:
            self.run_in_background(self._report_jedi(future))

    async def _report_jedi(self, future: Any) -> None:
        interpreter = self.settings.interpreter or "the default interpreter"
        try:
            warm = await asyncio.wrap_future(future)
        except Exception as error:
            log.warning("jedi could not start for %s: %s", interpreter, error)
            self.log_to_client(
                f"torchdoctor: hovers show notes only; jedi could not inspect {interpreter}: "
                f"{error}",
                types.MessageType.Warning,
            )
            return
        if self.jedi.state is not JediState.READY:
            return  # superseded by a newer interpreter
        if not warm.found_torch:
            self.log_to_client(
                f"torchdoctor: torch was not found by jedi in {warm.interpreter}; hovers show "
                "the pitfall notes without signatures",
                types.MessageType.Warning,
            )
            return
        self.log_to_client(
            f"torchdoctor: hover signatures ready (jedi, {warm.interpreter}, {warm.seconds:.1f} s)",
            types.MessageType.Info,
        )
        self.jedi.prefetch(sorted({n.describe for n in NOTES.values() if n.describe}))

    def log_to_client(self, message: str, kind: types.MessageType) -> None:
        log.info("%s", message)
        self.window_log_message(types.LogMessageParams(kind, message))

    # ---- transports: pygls' own, with our reader (transport.py) ------------------------------
    def start_io(
        self,
        stdin: BinaryIO | None = None,
        stdout: BinaryIO | None = None,
        takeover: Takeover | None = None,
    ) -> None:
        """Serve over stdio; with `takeover`, from where the early front stopped reading."""
        self._stop_event = stop = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        taken = takeover or Takeover.of_nothing(stdin or sys.stdin.buffer)
        self.early_sent = dict(taken.sent)

        async def read() -> None:
            await take_over(taken, self.protocol, stop)

        try:
            asyncio.run(read())
        except BrokenPipeError:
            log.error("the client has gone (broken pipe)")
        except (KeyboardInterrupt, SystemExit):  # SystemExit: the `exit` notification
            pass
        finally:
            self.shutdown()  # type: ignore[no-untyped-call]  # pygls's Server.shutdown is unannotated

    def start_tcp(self, host: str, port: int) -> None:
        self._stop_event = stop = threading.Event()

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.protocol.set_writer(writer)
            await serve_messages(stream_chunks(reader), self.protocol, stop)
            self.shutdown()  # type: ignore[no-untyped-call]  # pygls's Server.shutdown is unannotated

        async def listen() -> None:
            self._server = await asyncio.start_server(connection, host, port)
            log.info("listening on %s:%s", host, port)
            async with self._server:
                await self._server.serve_forever()

        try:
            asyncio.run(listen())
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
            pass

    # ---- errors ----------------------------------------------------------------------------
    def report_server_error(self, error: Exception, source: Any) -> None:
        """A handler raised. Requests already answer with an LSP error; for notifications the
        user is told once, and the server carries on either way."""
        log.error("%s: %s", getattr(source, "__name__", source), error)
        super().report_server_error(error, source)

    def close(self) -> None:
        self.jedi.shutdown()
        self.probes.runner.kill_now()  # a worker left after a client that never sent shutdown
        self.analysis_pool.shutdown(wait=False, cancel_futures=True)
        self.large_analysis_pool.shutdown(wait=False, cancel_futures=True)


def build_server() -> TorchDoctorServer:
    from .features import register_features  # the handlers need the class defined above
    from .notebooks import register_notebook_features

    server = TorchDoctorServer()
    register_features(server)
    register_notebook_features(server)  # wraps some of the handlers above: registered after
    return server


def exit_code(server: TorchDoctorServer) -> int:
    """LSP: 1 when `exit` came without a `shutdown` first."""
    return 1 if server.exit_received and not server.shutdown_requested else 0


def config_diagnostic(error: ConfigError) -> types.Diagnostic:
    """The error at its line and column of pyproject.toml (the first character when the file
    as a whole is wrong)."""
    line = max((error.line or 1) - 1, 0)
    column = max((error.column or 1) - 1, 0)
    return types.Diagnostic(
        range=types.Range(types.Position(line, column), types.Position(line, column + 1)),
        message=error.reason,
        severity=types.DiagnosticSeverity.Error,
        source="torchdoctor",
    )
