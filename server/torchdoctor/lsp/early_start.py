"""The server's first second: answers sent before the protocol library is loaded.

Importing pygls and lsprotocol takes 0.7-1.0 s on a 2-core machine (attrs writes and compiles
the methods of lsprotocol's 568 classes as they are imported): longer than analysing a file of a
few thousand lines. So the server starts with this front, which needs neither library. It
answers `initialize` with the capabilities the server declares (a test keeps the two equal),
analyses the Python documents the client opens, sends their diagnostics (pushed, or as the
answer to a pull) and records every message. The server is imported on another thread; once it
is, it receives the recorded messages in their order, without answering again what the front
answered, and reads the input from where the front stopped (`launch.py`).

Everything else waits for the server: any other request, an edit, a notebook, a document too
large to analyse or in a project whose configuration has problems. Such a message makes the
server start loading at once; otherwise it starts when the client has been quiet for a moment,
so that the first analysis does not share the processor with the import.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import __version__
from ..analysis import Config, Document
from ..analysis.gc_pause import gc_paused
from ..docs import normalise_locale
from .columns import UTF16, choose_encoding
from .diagnostic_json import diagnostic_json
from .framing import Body, Frame, Unreadable
from .project_config import ProjectConfigs, editor_config
from .rule_runs import LARGE_DOCUMENT_BYTES, run_rules, utf8_size
from .settings import Settings, parse_settings
from .uris import uri_to_path, workspace_root

log = logging.getLogger("torchdoctor.lsp")

# What the server declares (pygls builds it from the registered features, see
# tests/lsp/test_early_start.py); two fields depend on the client and are added per client.
CAPABILITIES: dict[str, Any] = {
    "textDocumentSync": {"openClose": True, "change": 2, "save": True},
    "hoverProvider": True,
    "codeActionProvider": {
        "codeActionKinds": ["quickfix", "source.fixAll.torchdoctor"],
        "resolveProvider": True,
    },
    "codeLensProvider": {"resolveProvider": False},
    "executeCommandProvider": {
        "commands": [
            "torchdoctor.server.fixAll",
            "torchdoctor.server.probe",
            "torchdoctor.server.probeDistributed",
        ]
    },
    "inlayHintProvider": {"resolveProvider": False},
    "diagnosticProvider": {
        "interFileDependencies": False,
        "workspaceDiagnostics": False,
        "identifier": "torchdoctor",
    },
    "workspace": {
        "workspaceFolders": {"supported": True, "changeNotifications": True},
        "fileOperations": {},
    },
}
# sent only to a client that has notebook capabilities (notebooks.SYNC_OPTIONS)
NOTEBOOK_DOCUMENT_SYNC: dict[str, Any] = {
    "notebookSelector": [{"notebook": "jupyter-notebook", "cells": [{"language": "python"}]}],
    "save": True,
}
ANALYSED_SCHEMES = ("file:", "untitled:")


def initialize_result(params: Mapping[str, Any]) -> dict[str, Any]:
    """The `initialize` answer the server gives a client that sent `params`."""
    client = params.get("capabilities") or {}
    offered = _path(client, "general", "positionEncodings")
    capabilities = {"positionEncoding": choose_encoding(offered), **CAPABILITIES}
    # pygls says False to the will-save notifications the client names (the server takes
    # neither) and leaves out those it does not
    synchronization = _path(client, "textDocument", "synchronization")
    named = [
        key
        for key in ("willSave", "willSaveWaitUntil")
        if isinstance(synchronization, dict) and synchronization.get(key) is not None
    ]
    if named:
        sync = dict(capabilities["textDocumentSync"])
        save = sync.pop("save")
        capabilities["textDocumentSync"] = {**sync, **dict.fromkeys(named, False), "save": save}
    if client.get("notebookDocument") is not None:
        capabilities["notebookDocumentSync"] = NOTEBOOK_DOCUMENT_SYNC
    return {
        "capabilities": capabilities,
        "serverInfo": {"name": "torchdoctor", "version": __version__},
    }


@dataclass(frozen=True)
class SentDiagnostics:
    """What the front sent for one document: the server sends the same again only where they
    changed (`TorchDoctorServer.shown_early`)."""

    version: int
    result_id: str  # of the pull answer; a pull client sends it back
    items: tuple[str, ...]  # each diagnostic's JSON text, as the server writes its own


@dataclass
class _Recorded:
    frame: Frame
    replay: bool = True  # False once the front has answered it for good


@dataclass
class _Opened:
    uri: str
    version: int
    text: str
    items: list[dict[str, Any]] | None = None  # its diagnostics, once analysed
    sent: bool = False


@dataclass
class EarlyFront:
    """Reads what the client sends first (a FrameReceiver, see transport.py); `send` writes
    one message's JSON text to the client."""

    send: Callable[[str], None]
    wants_server: bool = False  # something came that only the server can answer
    initialized: bool = False  # `initialize` has been answered
    broken: bool = False  # the front failed: it only records from then on
    _recorded: list[_Recorded] = field(default_factory=list)
    _initialize_id: int | str | None = None
    _settings: Settings = field(default_factory=Settings)
    _encoding: str = UTF16
    _pull: bool = False
    _locale: str = "en"
    _root_path: str | None = None
    _opened: dict[str, _Opened] = field(default_factory=dict)
    # pull requests waiting for their document's analysis: (entry, id, uri, previousResultId)
    _pulls: list[tuple[_Recorded, int | str, str, Any]] = field(default_factory=list)
    _configs: ProjectConfigs = field(default_factory=ProjectConfigs)

    # ---- what the server is handed ---------------------------------------------------------
    def replay(self) -> list[Frame]:
        """Every message received, in order, less the pulls the front answered."""
        return [entry.frame for entry in self._recorded if entry.replay]

    def sent(self) -> dict[str, SentDiagnostics]:
        """The diagnostics the client has from the front, by document."""
        return {
            uri: SentDiagnostics(
                opened.version,
                _result_id(opened.version),
                tuple(json.dumps(item, separators=(",", ":")) for item in opened.items),
            )
            for uri, opened in self._opened.items()
            if opened.sent and opened.items is not None
        }

    def answered(self) -> list[int | str]:
        """The requests that the server must handle but not answer: `initialize`."""
        return [] if self._initialize_id is None else [self._initialize_id]

    # ---- reading ---------------------------------------------------------------------------
    def receive_unreadable(self, request_id: int | str | None, reason: str) -> None:
        self._recorded.append(_Recorded(Unreadable(reason, request_id)))
        self.wants_server = True

    def receive_body(self, body: bytes) -> None:
        entry = _Recorded(Body(body))
        self._recorded.append(entry)
        if self.broken:
            return
        try:
            self._dispatch(entry, body)
        except Exception:  # a bug here must cost the client time, never an answer
            log.exception("the early front failed; the server answers from here on")
            self.broken = self.wants_server = True

    def _dispatch(self, entry: _Recorded, body: bytes) -> None:
        try:
            message = json.loads(body)
        except ValueError:
            message = None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self.wants_server = True
            return
        method = message.get("method")
        params = message.get("params")
        request_id = message.get("id")
        is_request = "id" in message
        if is_request and not _is_id(request_id):
            self.wants_server = True
        elif not self.initialized:
            if method == "initialize" and is_request and _initialize_looks_valid(params):
                self._initialize(request_id, params)
            else:
                self.wants_server = True
        elif not is_request and method == "initialized":
            pass
        elif not is_request and method == "textDocument/didOpen":
            self._open(params)
        elif is_request and method == "textDocument/diagnostic":
            self._pull_request(entry, request_id, params)
        else:
            if not is_request and method in ("textDocument/didChange", "textDocument/didClose"):
                uri = _uri_in(params)
                if uri is not None:
                    self._opened.pop(uri, None)  # its next diagnostics are the server's
            self.wants_server = True

    def _initialize(self, request_id: Any, params: Any) -> None:
        result = initialize_result(params)
        self._encoding = result["capabilities"]["positionEncoding"]
        self._pull = _path(params["capabilities"], "textDocument", "diagnostic") is not None
        options = params.get("initializationOptions")
        if isinstance(options, Mapping) and "settings" in options:
            self._settings = parse_settings(options.get("settings")).settings
        locale = self._settings.locale
        self._locale = locale if locale != "auto" else normalise_locale(params.get("locale"))
        folders = params.get("workspaceFolders") or []
        _, self._root_path = workspace_root(
            params.get("rootUri"), folders[0]["uri"] if folders else None, params.get("rootPath")
        )
        answer = {"jsonrpc": "2.0", "id": request_id, "result": result}
        self._initialize_id = request_id
        self.initialized = True
        self.send(json.dumps(answer, separators=(",", ":")))

    def _open(self, params: Any) -> None:
        item = params.get("textDocument") if isinstance(params, dict) else None
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("uri"), str)
            or not isinstance(item.get("text"), str)
            or not _is_int(item.get("version"))
            or item.get("languageId") != "python"
            or not item["uri"].startswith(ANALYSED_SCHEMES)
            or not self._settings.enable
        ):
            self.wants_server = True
            return
        self._opened[item["uri"]] = _Opened(item["uri"], item["version"], item["text"])

    def _pull_request(self, entry: _Recorded, request_id: Any, params: Any) -> None:
        uri = _uri_in(params)
        if uri is None or uri not in self._opened:
            self.wants_server = True
            return
        previous = params.get("previousResultId")
        self._pulls.append((entry, request_id, uri, previous))

    # ---- answering -------------------------------------------------------------------------
    def work(self) -> None:
        """Analyse the documents opened and not analysed yet; send what the client is owed."""
        if self.broken:
            return
        try:
            self._work()
        except Exception:
            log.exception("the early front failed; the server answers from here on")
            self.broken = self.wants_server = True

    @property
    def pending(self) -> bool:
        """Documents wait for their analysis (`work` analyses one at a time, so that the
        reading in between sees new messages and the time to load the server)."""
        return not self.broken and any(o.items is None for o in self._opened.values())

    def _work(self) -> None:
        waiting = next((o for o in self._opened.values() if o.items is None), None)
        if waiting is not None:
            waiting.items = self._diagnostics(waiting)
            if waiting.items is None:
                del self._opened[waiting.uri]
                self.wants_server = True
            elif not self._pull:
                self._publish(waiting)
        pulls, self._pulls = self._pulls, []
        for pull in pulls:
            entry, request_id, uri, previous = pull
            found = self._opened.get(uri)
            if found is None:  # changed or closed: the server answers
                self.wants_server = True
                continue
            if found.items is None:
                self._pulls.append(pull)
                continue
            entry.replay = False
            found.sent = True
            result_id = _result_id(found.version)
            report: dict[str, Any] = (
                {"kind": "unchanged", "resultId": result_id}
                if previous == result_id
                else {"kind": "full", "resultId": result_id, "items": found.items}
            )
            answer = {"jsonrpc": "2.0", "id": request_id, "result": report}
            self.send(json.dumps(answer, separators=(",", ":")))

    def _diagnostics(self, opened: _Opened) -> list[dict[str, Any]] | None:
        """The document's diagnostics as the server would make them, or None where the server
        must do it: a large document (it has a lane of its own there, so that it holds nothing
        else up), one past the size limit or in a project whose configuration has problems (the
        user is told), one on which a rule crashed (reported)."""
        size = utf8_size(opened.text)
        limit = self._settings.max_document_size
        if size >= LARGE_DOCUMENT_BYTES or (limit and size > limit):
            return None
        path = uri_to_path(opened.uri)
        loaded = self._configs.for_file(path, self._root_path)
        if loaded.error is not None or loaded.config.warnings:
            return None
        config = editor_config(loaded.config, self._settings)
        # the document is freed before the collector's pause ends (see engine.check)
        with gc_paused():
            return self._analysed(opened.text, path or opened.uri, config)

    def _analysed(self, text: str, path: str, config: Config) -> list[dict[str, Any]] | None:
        # a plain analysis: the incremental analyser's first one costs a third more (it parses
        # block by block and keeps each block's findings), and this one is what the user waits for
        document = Document.parse(text, path)
        try:
            findings, crashes = run_rules(document, config)
            if crashes:
                return None
            lines = document.index.lines
            return [diagnostic_json(f, lines, self._encoding, self._locale) for f in findings]
        finally:
            document.drop_derived_facts()

    def _publish(self, opened: _Opened) -> None:
        opened.sent = True
        params = {"uri": opened.uri, "version": opened.version, "diagnostics": opened.items}
        message = {"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": params}
        self.send(json.dumps(message, separators=(",", ":")))


def _result_id(version: int) -> str:
    return f"early.{version}"


def _path(value: Any, *keys: str) -> Any:
    """value[keys[0]][keys[1]]..., None where a step is missing or not an object."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_id(value: Any) -> bool:
    return _is_int(value) or isinstance(value, str)


def _uri_in(params: Any) -> str | None:
    item = params.get("textDocument") if isinstance(params, dict) else None
    uri = item.get("uri") if isinstance(item, dict) else None
    return uri if isinstance(uri, str) else None


def _initialize_looks_valid(params: Any) -> bool:
    """Whether the server would take these `initialize` params; where in doubt the front
    leaves the answer to the server, which says what is wrong with them."""
    if not isinstance(params, dict) or not isinstance(params.get("capabilities"), dict):
        return False
    optional_types: dict[str, tuple[type, ...]] = {
        "processId": (int,),
        "rootUri": (str,),
        "rootPath": (str,),
        "locale": (str,),
        "workspaceFolders": (list,),
        "clientInfo": (dict,),
    }
    for key, types_ in optional_types.items():
        value = params.get(key)
        if value is not None and (not isinstance(value, types_) or isinstance(value, bool)):
            return False
    if params.get("trace") not in (None, "off", "messages", "verbose"):
        return False
    folders = params.get("workspaceFolders") or []
    if not all(
        isinstance(folder, dict)
        and isinstance(folder.get("uri"), str)
        and isinstance(folder.get("name"), str)
        for folder in folders
    ):
        return False
    general = params["capabilities"].get("general")
    if general is not None and not isinstance(general, dict):
        return False
    offered = general.get("positionEncodings") if general else None
    return offered is None or (
        isinstance(offered, list) and all(isinstance(item, str) for item in offered)
    )
