"""The server's own commands: fix-all through workspace/applyEdit, and the probe (handed to
probe_bridge with the client's workDoneToken for progress; cancelled by `$/cancelRequest` or by
`window/workDoneProgress/cancel`), whose report then feeds diagnostics, lenses and hints."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from . import code_actions, probe_bridge, probe_build, probe_distributed, probe_sweep
from .notebooks import notebook_probe_source
from .probe_results import ProbeSnapshot
from .protocol import EXECUTE_COMMAND_PARAMS
from .request_cancellation import on_client_cancel
from .server import TorchDoctorServer
from .uris import uri_to_path

FIX_ALL_SERVER_COMMAND = "torchdoctor.server.fixAll"


def register_commands(server: TorchDoctorServer) -> None:
    @server.command(FIX_ALL_SERVER_COMMAND)
    async def fix_all_command(ls: TorchDoctorServer, *arguments: Any) -> dict[str, Any]:
        uri = _uri_argument(arguments)
        result = await ls.scheduler.current(uri)
        document = ls.documents.get(uri)
        if result is None or document is None:
            raise JsonRpcInvalidParams(f"{uri} is not open")
        config = ls.config_for(document)
        loop = asyncio.get_running_loop()
        edits = await loop.run_in_executor(
            ls.analysis_pool, code_actions.fix_all_edits, result, config
        )
        if not edits:
            return {"applied": False, "reason": "nothing to fix"}
        edit = code_actions.workspace_edit(result, edits, ls.edit_support)
        answer = await ls.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(edit=edit, label="torchdoctor: fix all")
        )
        return {"applied": bool(answer.applied), "reason": answer.failure_reason}

    @server.command(probe_bridge.PROBE_SERVER_COMMAND)
    async def probe_command(ls: TorchDoctorServer, *arguments: Any) -> Any:
        try:
            uri, class_name, input_spec = probe_bridge.parse_probe_arguments(arguments)
            build = probe_build.build_options(arguments)
            sweep = probe_sweep.sweep_options(arguments)
        except ValueError as error:
            raise JsonRpcInvalidParams(str(error)) from error
        command = EXECUTE_COMMAND_PARAMS.get()
        token = command.work_done_token if command is not None else None
        document = ls.documents.get(uri)
        text = document.text if document is not None else None
        # a class in a notebook: its cells' definitions only, never their training statements
        notebook = notebook_probe_source(ls.notebooks, uri, class_name)
        cancel = asyncio.Event()
        on_client_cancel(ls.protocol, cancel)  # $/cancelRequest
        progress = _ProgressReporter(ls, token)
        request = probe_bridge.ProbeRequest(
            uri=uri,
            path=document.path if document is not None else uri_to_path(uri),
            class_name=class_name,
            input_spec=input_spec,
            source=notebook.source if notebook is not None else text,
            interpreter=ls.settings.interpreter,
            probe=ls.settings.probe,
            work_done_token=token,
            report_progress=progress.report,
            cancel=cancel,
            workspace_folders=_workspace_folder_paths(ls),
            build=build,
            sweep=sweep,
        )
        outcome: probe_bridge.ProbeOutcome | None = None
        try:
            with ls.probes.cancellable_by(token, cancel):  # window/workDoneProgress/cancel
                outcome = await ls.probes.runner.run(request)
        finally:
            progress.end(outcome is not None, cancel.is_set())
        assert outcome is not None  # run() raises when there is no report
        if notebook is not None:
            outcome.report_json.setdefault("warnings", []).insert(0, notebook.note)
        if text is not None and ls.documents.get(uri) is not None:
            snapshot = ProbeSnapshot.of(uri, class_name, outcome.user_path, text, outcome.report)
            ls.probes.results.put(snapshot)
            ls.probes.generation += 1
            await _show_probe_results(ls, uri)
        return outcome.report_json

    probe_distributed.register_distributed_probe(server)


def _workspace_folder_paths(ls: TorchDoctorServer) -> tuple[str, ...]:
    """The workspace folders on disk (the root when the client named no folders)."""
    uris = [folder.uri for folder in ls.workspace.folders.values()]
    paths = [uri_to_path(uri) for uri in uris]
    if ls.root_path:
        paths.append(ls.root_path)
    return tuple(dict.fromkeys(path for path in paths if path))


async def _show_probe_results(ls: TorchDoctorServer, uri: str) -> None:
    """Runtime diagnostics, the lens title and inlay hints now come from the new report: push
    the diagnostics, or ask the client to pull them again, and to refresh lenses and hints."""
    if ls.pull_diagnostics:
        if ls.client_supports("workspace.diagnostics.refresh_support"):
            ls.workspace_diagnostic_refresh(None)
    else:
        result = await ls.scheduler.current(uri)
        if result is not None:
            ls.publish(uri, ls.diagnostics_of(result), result.version)
    if ls.client_supports("workspace.code_lens.refresh_support"):
        ls.workspace_code_lens_refresh(None)
    if ls.client_supports("workspace.inlay_hint.refresh_support"):
        ls.workspace_inlay_hint_refresh(None)


def _uri_argument(arguments: tuple[Any, ...]) -> str:
    """`[uri]`, `[{"uri": uri}]` or `[{"textDocument": {"uri": uri}}]`."""
    if len(arguments) == 1:
        value = arguments[0]
        if isinstance(value, Mapping):
            value = value.get("uri") or (value.get("textDocument") or {}).get("uri")
        if isinstance(value, str) and value:
            return value
    raise JsonRpcInvalidParams("expected the document URI as the only argument")


class _ProgressReporter:
    """Work-done progress on the token the client passed with the command (nothing without)."""

    def __init__(self, ls: TorchDoctorServer, token: types.ProgressToken | None) -> None:
        self._ls = ls
        self._token = token
        self._begun = False

    def report(self, message: str, percent: int | None = None) -> None:
        if self._token is None:
            return
        progress = self._ls.work_done_progress
        if not self._begun:
            self._begun = True
            begin = types.WorkDoneProgressBegin(
                title="Probe", cancellable=True, message=message, percentage=percent
            )
            progress.begin(self._token, begin)
        else:
            progress.report(
                self._token, types.WorkDoneProgressReport(message=message, percentage=percent)
            )

    def end(self, succeeded: bool, cancelled: bool) -> None:
        if self._token is None or not self._begun:
            return
        message = "done" if succeeded else "cancelled" if cancelled else "failed"
        self._ls.work_done_progress.end(self._token, types.WorkDoneProgressEnd(message=message))
        # pygls keeps a future per token it has seen begin; the token is the client's, used once
        self._ls.work_done_progress.tokens.pop(self._token, None)
