"""Tell a long-running command that the client sent `$/cancelRequest` for it.

pygls 2 runs `workspace/executeCommand` as a generator that hands the arguments to the command
handler, and a cancel request cancels only the generator's future: pygls answers the request with
RequestCancelled at once, while the handler's own task runs on. For the probe that would leave
a runner computing for nobody. So the request id is recorded while pygls dispatches a request
(the handler's task copies the context when it is created: protocol.py sets it) and the handler
watches the request's future for its cancellation.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from contextvars import ContextVar
from typing import Any

from pygls.protocol import JsonRPCProtocol

# Set by TorchDoctorProtocol while it dispatches a request.
REQUEST_ID: ContextVar[Any] = ContextVar("torchdoctor_request_id", default=None)


def on_client_cancel(protocol: JsonRPCProtocol, event: asyncio.Event) -> None:
    """Set `event` when the client cancels the request whose handler calls this."""
    request = protocol._request_futures.get(REQUEST_ID.get())
    if request is None:
        return
    loop = asyncio.get_running_loop()

    def cancelled(future: Future[Any] | asyncio.Future[Any]) -> None:
        if future.cancelled():
            loop.call_soon_threadsafe(event.set)

    request.add_done_callback(cancelled)
