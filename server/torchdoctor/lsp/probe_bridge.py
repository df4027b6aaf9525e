"""Where the server command `torchdoctor.server.probe` meets the probe.

The language server parses the request and hands a `ProbeRequest` to `run_probe_request`, the
one hook the probe plugs into: it should start `probe/client.py` with the user's interpreter,
report progress through `request.report_progress`, and return the report as a JSON-able dict.
Until then it answers with an LSP error that the editor shows as a message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from .settings import ProbeSettings

PROBE_SERVER_COMMAND = "torchdoctor.server.probe"


class ProbeUnavailableError(JsonRpcException):
    """An LSP error answer (RequestFailed) rather than an internal error: nothing crashed."""

    CODE = types.LSPErrorCodes.RequestFailed.value


@dataclass(frozen=True)
class ProbeRequest:
    uri: str
    path: str | None
    class_name: str
    input_spec: str | None  # e.g. "(8, 3, 224, 224)" from the editor's prompt
    source: str | None  # the document's text as the editor has it (may be unsaved)
    interpreter: str  # "" when the user set none: the probe picks `python3`
    probe: ProbeSettings
    work_done_token: types.ProgressToken | None
    # report_progress(message, percent) sends work-done progress when the client gave a token
    report_progress: Callable[[str, int | None], None]


async def run_probe_request(request: ProbeRequest) -> dict[str, Any]:
    """The hook the probe replaces: run the probe and return its report."""
    raise ProbeUnavailableError("the probe is not available yet")


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
