"""The server command `torchdoctor.server.probeDistributed`: the editor's "Probe with 2 ranks
(DDP/FSDP)".

Arguments: `[{"uri", "className", "input"?, "nproc"?, "strategy"?, "backend"?}]`. The model
runs on N local ranks under torchrun (probe/distributed.py); the answer is the report's
`distributed` section as JSON (REPORT.md), with the paths of an unsaved copy mapped back to
the user's file. Cancelling the request (`$/cancelRequest`, or the progress notification's
cancel button) kills every rank. Like the single probe it runs only code the user put in front
of it: a file inside a workspace folder, or one open in the editor.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from ..probe.client import ProbeArgumentError, ProbeLimits
from ..probe.distributed import (
    BACKEND_CHOICES,
    STRATEGY_CHOICES,
    DistributedOptions,
    run_distributed_probe,
)
from ..probe.interpreters import probe_interpreter
from .probe_bridge import (
    ProbeFailedError,
    outside_workspace,
    probe_memory_limit,
)
from .probe_source import probe_source
from .protocol import EXECUTE_COMMAND_PARAMS
from .request_cancellation import on_client_cancel
from .server import TorchDoctorServer
from .uris import uri_to_path

PROBE_DISTRIBUTED_SERVER_COMMAND = "torchdoctor.server.probeDistributed"
DEFAULT_NPROC = 2
MAX_EDITOR_NPROC = 8
EDITOR_ITERS = 5  # timed steps per strategy: enough for a median, cheap on a laptop


@dataclasses.dataclass(frozen=True)
class DistributedRequest:
    uri: str
    class_name: str
    input_spec: str | None
    nproc: int
    strategy: str
    backend: str


def parse_distributed_arguments(arguments: tuple[Any, ...]) -> DistributedRequest:
    if len(arguments) != 1 or not isinstance(arguments[0], Mapping):
        raise ValueError('expected [{"uri", "className", "nproc"?, "strategy"?, "backend"?}]')
    payload = arguments[0]
    uri, class_name = payload.get("uri"), payload.get("className")
    input_spec = payload.get("input")
    nproc = payload.get("nproc", DEFAULT_NPROC)
    strategy = payload.get("strategy", "both")
    backend = payload.get("backend", "auto")
    if not isinstance(uri, str) or not isinstance(class_name, str) or not class_name:
        raise ValueError("the probe needs a document URI and a class name")
    if input_spec is not None and not isinstance(input_spec, str):
        raise ValueError('`input` must be a string such as "(8, 3, 224, 224)"')
    if isinstance(nproc, bool) or not isinstance(nproc, int) or not 1 <= nproc <= MAX_EDITOR_NPROC:
        raise ValueError(f"`nproc` must be an integer from 1 to {MAX_EDITOR_NPROC}")
    if strategy not in STRATEGY_CHOICES or backend not in BACKEND_CHOICES:
        raise ValueError("`strategy` is ddp, fsdp or both; `backend` is auto, gloo or nccl")
    return DistributedRequest(uri, class_name, input_spec, nproc, strategy, backend)


def register_distributed_probe(server: TorchDoctorServer) -> None:
    @server.command(PROBE_DISTRIBUTED_SERVER_COMMAND)
    async def probe_distributed_command(ls: TorchDoctorServer, *arguments: Any) -> Any:
        try:
            request = parse_distributed_arguments(arguments)
        except ValueError as error:
            raise JsonRpcInvalidParams(str(error)) from error
        command = EXECUTE_COMMAND_PARAMS.get()
        token = command.work_done_token if command is not None else None
        cancel = asyncio.Event()
        on_client_cancel(ls.protocol, cancel)
        progress = _Progress(ls, token)
        try:
            with ls.probes.cancellable_by(token, cancel):
                answer = await run_for_editor(ls, request, cancel, progress.report)
        finally:
            progress.end()
        return answer


async def run_for_editor(
    ls: TorchDoctorServer,
    request: DistributedRequest,
    cancel: asyncio.Event,
    report: Any,
) -> dict[str, Any]:
    document = ls.documents.get(request.uri)
    text = document.text if document is not None else None
    path = document.path if document is not None else uri_to_path(request.uri)
    on_disk = (uri_to_path(f.uri) for f in ls.workspace.folders.values())
    folders = tuple(folder for folder in on_disk if folder is not None) + (
        (ls.root_path,) if ls.root_path else ()
    )
    if text is None and path is not None and outside_workspace(path, folders):
        raise ProbeFailedError(
            f"cannot probe {request.class_name}: {path} is outside the workspace folders; "
            "open it in the editor to probe it"
        )
    settings = ls.settings.probe
    memory = probe_memory_limit(settings.memory_limit)
    limits = ProbeLimits(
        timeout_s=max(settings.timeout, 60.0),
        memory_limit_bytes=memory // request.nproc if memory else None,  # per rank
    )
    python = probe_interpreter(ls.settings.interpreter)
    report(f"launching {request.nproc} rank(s) with torchrun")
    try:
        with probe_source(path, text, path or request.uri) as source:
            options = DistributedOptions(
                file=source.probe_path,
                target=request.class_name,
                nproc=request.nproc,
                strategy=request.strategy,
                backend=request.backend,
                input_spec=request.input_spec,
                iters=EDITOR_ITERS,
                origin=source.origin,
            )
            info = await run_distributed_probe(
                python, options, limits=limits, cancel=cancel, on_progress=report
            )
            return {"file": source.user_path, **source.to_user(dataclasses.asdict(info))}
    except (ProbeArgumentError, FileNotFoundError) as error:
        raise ProbeFailedError(f"cannot probe {request.class_name}: {error}") from error


class _Progress:
    """Work-done progress on the client's token (nothing without one)."""

    def __init__(self, ls: TorchDoctorServer, token: types.ProgressToken | None) -> None:
        self._ls = ls
        self._token = token
        self._begun = False

    def report(self, message: str) -> None:
        if self._token is None:
            return
        progress = self._ls.work_done_progress
        if not self._begun:
            self._begun = True
            title = "Probe across ranks"
            begin = types.WorkDoneProgressBegin(title=title, cancellable=True, message=message)
            progress.begin(self._token, begin)
        else:
            progress.report(self._token, types.WorkDoneProgressReport(message=message))

    def end(self) -> None:
        if self._token is None or not self._begun:
            return
        self._ls.work_done_progress.end(self._token, types.WorkDoneProgressEnd(message="done"))
        self._ls.work_done_progress.tokens.pop(self._token, None)
