"""The server's own commands: fix-all through workspace/applyEdit, and the probe (handed to
probe_bridge with the client's workDoneToken for progress)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from . import code_actions, probe_bridge
from .protocol import EXECUTE_COMMAND_PARAMS
from .server import TorchDoctorServer

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
        except ValueError as error:
            raise JsonRpcInvalidParams(str(error)) from error
        command = EXECUTE_COMMAND_PARAMS.get()
        token = command.work_done_token if command is not None else None
        document = ls.documents.get(uri)
        progress = _ProgressReporter(ls, token)
        request = probe_bridge.ProbeRequest(
            uri=uri,
            path=document.path if document is not None else None,
            class_name=class_name,
            input_spec=input_spec,
            source=document.text if document is not None else None,
            interpreter=ls.settings.interpreter,
            probe=ls.settings.probe,
            work_done_token=token,
            report_progress=progress.report,
        )
        try:
            return await probe_bridge.run_probe_request(request)
        finally:
            progress.end()


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
            progress.begin(
                self._token,
                types.WorkDoneProgressBegin(title="Probe", message=message, percentage=percent),
            )
        else:
            progress.report(
                self._token, types.WorkDoneProgressReport(message=message, percentage=percent)
            )

    def end(self) -> None:
        if self._token is not None and self._begun:
            self._ls.work_done_progress.end(self._token, types.WorkDoneProgressEnd())
