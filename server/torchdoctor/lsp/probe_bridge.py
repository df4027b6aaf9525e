"""Where the server command `torchdoctor.server.probe` meets the probe.

The language server parses the request and hands a `ProbeRequest` to `ProbeRunner.run`, which
runs `probe/client.py` in a warm worker of the user's interpreter (torch stays imported there
between probes; the server itself never imports torch), reports progress through
`request.report_progress`, and returns the report. A probe that cannot finish becomes an LSP
error whose message names the user's file and line; a cancelled one becomes RequestCancelled.

A probe runs the user's code, so the server probes only what the user put in front of it: a
file inside a workspace folder, or one open in the editor. Probes it starts get an
address-space limit by default (the `probe.memoryLimit` setting), so a model that allocates
without end fails with an out-of-memory error instead of making the machine swap.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcRequestCancelled

from ..probe.build_options import BuildOptions
from ..probe.client import (
    ProbeArgumentError,
    ProbeLimits,
    ProbeOptions,
    WorkerPool,
)
from ..probe.interpreters import probe_interpreter
from ..probe.schema import (
    ErrorEvent,
    FinalEvent,
    ProbeEvent,
    ProbeReport,
    ProgressEvent,
    SchemaError,
)
from ..probe.sweep_options import SweepOptions
from .probe_source import ProbeSource, probe_source
from .settings import ProbeSettings

log = logging.getLogger(__name__)

PROBE_SERVER_COMMAND = "torchdoctor.server.probe"
# One warm worker per interpreter; a second interpreter (a changed setting) may stay warm too.
WARM_INTERPRETERS = 2


class ProbeFailedError(JsonRpcException):
    """An LSP error answer (RequestFailed) rather than an internal error: the user's code or
    environment failed, the server did not."""

    CODE = types.LSPErrorCodes.RequestFailed.value


@dataclass(frozen=True)
class ProbeRequest:
    uri: str
    path: str | None
    class_name: str
    input_spec: str | None  # e.g. "(8, 3, 224, 224)" from the editor's prompt
    source: str | None  # the document's text as the editor has it (may be unsaved)
    interpreter: str  # "" when the user set none: see `probe_interpreter`
    probe: ProbeSettings
    work_done_token: types.ProgressToken | None
    # report_progress(message, percent) sends work-done progress when the client gave a token
    report_progress: Callable[[str, int | None], None]
    # set when the client cancels: the runner's whole process group is killed
    cancel: asyncio.Event
    # the workspace folders' paths: a file outside them is probed only when open in the editor
    workspace_folders: tuple[str, ...] = ()
    # constructor arguments, factory, dtype, autocast, memory format (see probe_build.py)
    build: BuildOptions = BuildOptions()
    # the batch-size sweep, when the report view asked for it (see probe_sweep.py)
    sweep: SweepOptions = SweepOptions()


@dataclass(frozen=True)
class ProbeOutcome:
    report: ProbeReport
    report_json: dict[str, Any]  # what the command answers: the report, paths the user's
    user_path: str


def probe_memory_limit(setting_mib: int | None) -> int | None:
    """Bytes of address space for an editor-started probe: the setting (MiB; 0 turns the
    limit off), by default half of this machine's physical memory (None when unknown)."""
    if setting_mib is not None:
        return setting_mib * 1024 * 1024 if setting_mib > 0 else None
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None
    return physical // 2 if physical > 0 else None


def outside_workspace(path: str, folders: tuple[str, ...]) -> bool:
    """True when `path` (symlinks resolved) is inside none of the workspace folders."""
    real = os.path.realpath(path)
    for folder in folders:
        root = os.path.realpath(folder)
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            return False
    return True


class ProbeRunner:
    """Runs probes in warm workers, one per interpreter, owned by the server."""

    def __init__(self) -> None:
        self._pool = WorkerPool(ProbeLimits(), max_workers=WARM_INTERPRETERS)

    async def run(self, request: ProbeRequest) -> ProbeOutcome:
        python = probe_interpreter(request.interpreter)
        display = request.path or request.uri
        if request.source is None and request.path is not None:
            if outside_workspace(request.path, request.workspace_folders):
                raise ProbeFailedError(
                    f"cannot probe {request.class_name}: {request.path} is outside the "
                    "workspace folders; open it in the editor to probe it"
                )
        request.report_progress(f"Starting {os.path.basename(python)}", 0)
        limits = replace(
            self._pool.limits,
            timeout_s=request.probe.timeout,
            memory_limit_bytes=probe_memory_limit(request.probe.memory_limit),
        )
        try:
            with probe_source(request.path, request.source, display) as source:
                options = ProbeOptions(
                    file=source.probe_path,
                    target=request.class_name,
                    input_spec=request.input_spec,
                    device=request.probe.device,
                    iters=request.probe.iters,
                    cwd=_existing_folder(request.path),
                    origin=source.origin,
                    build=request.build,
                    sweep=request.sweep,
                )
                final = await self._pool.probe(
                    python,
                    options,
                    on_event=lambda event: _report(request, event),
                    cancel=request.cancel,
                    limits=limits,
                )
                answer = source.to_user(_event_json(final))
        except (ProbeArgumentError, FileNotFoundError) as error:
            raise ProbeFailedError(f"cannot probe {request.class_name}: {error}") from error
        if isinstance(final, ErrorEvent):
            raise _error_answer(final, answer, request, source)
        try:
            report = ProbeReport.from_dict(answer)
        except SchemaError as error:  # a newer runner than this server: say so, do not crash
            raise ProbeFailedError(f"the probe's report could not be read: {error}") from error
        return ProbeOutcome(report, answer, source.user_path)

    async def close(self) -> None:
        await self._pool.close()

    def kill_now(self) -> None:
        """At exit, when there is no event loop left to close the workers with."""
        self._pool.kill_now()


def _existing_folder(path: str | None) -> str | None:
    """The user's folder, where their code expects to run (the copy may sit elsewhere)."""
    folder = os.path.dirname(os.path.abspath(path)) if path else None
    return folder if folder and os.path.isdir(folder) else None


def _report(request: ProbeRequest, event: ProbeEvent) -> None:
    if isinstance(event, ProgressEvent):
        message = event.message or event.stage
        request.report_progress(message, int(event.percent))


def _event_json(final: FinalEvent) -> dict[str, Any]:
    if isinstance(final, ErrorEvent):
        return {
            "kind": final.kind,
            "message": final.message,
            "file": final.file,
            "line": final.line,
            "traceback": final.traceback,
            "exit_code": final.exit_code,
            "stderr_tail": final.stderr_tail,
        }
    return final.report.to_dict()


def _error_answer(
    final: ErrorEvent, answer: dict[str, Any], request: ProbeRequest, source: ProbeSource
) -> JsonRpcException:
    if final.kind == "cancelled" or request.cancel.is_set():
        return JsonRpcRequestCancelled("the probe was cancelled")
    message = str(answer["message"])
    if answer.get("file") and answer.get("line"):
        where = f"{answer['file']}:{answer['line']}"
        if where not in message:
            message = f"{where}: {message}"
    log.info("probe of %s in %s failed: %s", request.class_name, source.user_path, message)
    return ProbeFailedError(f"probe failed ({final.kind}): {message}", data=answer)


def parse_probe_arguments(arguments: tuple[Any, ...]) -> tuple[str, str, str | None]:
    """`[{"uri", "className", "input"?}]` (the VS Code extension) or `[uri, className, input?]`
    (a CodeLens command forwarded as it is)."""
    if len(arguments) == 1 and isinstance(arguments[0], Mapping):
        payload = arguments[0]
        uri, class_name, input_spec = (
            payload.get("uri"),
            payload.get("className"),
            payload.get("input"),
        )
    elif 2 <= len(arguments) <= 3:
        uri, class_name = arguments[0], arguments[1]
        input_spec = arguments[2] if len(arguments) == 3 else None
    else:
        raise ValueError("expected [{uri, className, input?}] or [uri, className, input?]")
    if not isinstance(uri, str) or not isinstance(class_name, str) or not class_name:
        raise ValueError("the probe needs a document URI and a class name")
    if input_spec is not None and not isinstance(input_spec, str):
        raise ValueError('`input` must be a string such as "(8, 3, 224, 224)"')
    return uri, class_name, input_spec
