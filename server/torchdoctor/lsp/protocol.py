"""pygls' protocol with our changes.

- Text synchronisation goes to our DocumentStore only: pygls' workspace would keep a second copy
  of every document (and splits lines differently from LSP, see documents.py).
- Command handlers can see the whole `workspace/executeCommand` request: pygls passes them only
  the arguments, and the probe needs the client's workDoneToken to report progress.
- Each request's id is recorded in the context its handler runs in, so a long command can watch
  for the client's `$/cancelRequest` (see request_cancellation.py).
- A request whose params do not fit the method's schema was logged and dropped by pygls 2.1: the
  client waited for an answer forever. It now gets the InvalidParams error it is owed.
- pygls files the future of every coroutine, thread and generator handler under the message id
  so that `$/cancelRequest` can find it, and removes it only when it answers a request.
  Notifications (every didChange is handled by a generator) and the inner steps of generator
  handlers get a fresh id that is never removed: about 1.5 KB per keystroke, kept for the life of
  the server. Each future is now forgotten once it is done.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Generator
from concurrent.futures import Future
from contextvars import ContextVar
from functools import partial
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.protocol import JsonRPCProtocol, LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from .request_cancellation import REQUEST_ID

log = logging.getLogger("torchdoctor.lsp")

# Set while a workspace/executeCommand request is dispatched; a command handler started by it
# (a task, which copies the context when it is created) reads the request's own params.
EXECUTE_COMMAND_PARAMS: ContextVar[types.ExecuteCommandParams | None] = ContextVar(
    "torchdoctor_execute_command_params", default=None
)


class _AnsweredRequest:
    """Stands in for a request that was answered with an error while it was being read."""

    jsonrpc = JsonRPCProtocol.VERSION


class TorchDoctorProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            # json.loads calls this for every object in a message; only the message itself
            # carries "jsonrpc", and only a request carries both an id and a method
            is_request = "id" in data and "method" in data and "error" not in data
            if not is_request or not isinstance(data["id"], (int, str)):
                raise
            log.warning("answering %s %r with %s", data["method"], data["id"], error)
            self._send_response(data["id"], error=error.to_response_error())
            return _AnsweredRequest()

    def handle_message(self, message: Any) -> None:
        if not isinstance(message, _AnsweredRequest):
            super().handle_message(message)

    def _execute_handler(
        self,
        msg_id: Any,
        handler: Any,
        callback: Any,
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        if future is not None:
            # added after pygls' own callback, so a request's response has gone out first
            future.add_done_callback(partial(self._forget_future, msg_id))

    def _forget_future(self, msg_id: Any, future: Future[Any] | asyncio.Future[Any]) -> None:
        # a thread handler's callback runs in its worker thread: pop only our own entry
        if self._request_futures.get(msg_id) is future:
            self._request_futures.pop(msg_id, None)

    def _handle_request(self, msg_id: Any, method_name: str, params: Any) -> None:
        REQUEST_ID.set(msg_id)
        super()._handle_request(msg_id, method_name, params)

    def _user_handler(self, method: str) -> Any:
        return self.fm.features.get(method)

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(
        self, params: types.DidOpenTextDocumentParams
    ) -> Generator[Any, Any, None]:
        if (handler := self._user_handler(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(
        self, params: types.DidChangeTextDocumentParams
    ) -> Generator[Any, Any, None]:
        if (handler := self._user_handler(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(
        self, params: types.DidCloseTextDocumentParams
    ) -> Generator[Any, Any, None]:
        if (handler := self._user_handler(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(
        self, params: types.ExecuteCommandParams
    ) -> Generator[Any, Any, Any]:
        EXECUTE_COMMAND_PARAMS.set(params)
        return (yield from super().lsp_workspace__execute_command(params))
