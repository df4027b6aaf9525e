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
- The lifecycle the LSP specification asks for, which pygls 2.1 does not keep
  (pygls/protocol/json_rpc.py, `JsonRPCProtocol.handle_message`): a request before `initialize`
  is answered with ServerNotInitialized (pygls ran it on a server with no client facts) and a
  notification then is dropped, except `exit`; a request after `shutdown` is answered with
  InvalidRequest (pygls logged it and never answered, so the client waited for ever).
- Bytes that are not a message get a ParseError, and a message that is not a JSON-RPC request,
  notification or response an InvalidRequest (framing.py and transport.py read the stream).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Generator, Iterable
from concurrent.futures import Future
from contextvars import ContextVar
from functools import partial
from typing import Any

from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
    JsonRpcServerNotInitialized,
)
from pygls.protocol import JsonRPCProtocol, LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from .framing import framed, request_id_in
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
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initialize_received = False
        self.shutdown_received = False  # from the moment the request arrives, not when answered
        # requests the early front answered (early_start.py): handled here, answered only once
        self._answered_early: set[int | str] = set()

    # ---- reading ---------------------------------------------------------------------------
    def receive_body(self, body: bytes) -> None:
        """One message's bytes, as the transport cut them out of the stream."""
        try:
            message = json.loads(body, object_hook=self.structure_message)
        except ValueError as error:  # not JSON, or not UTF-8
            self.receive_unreadable(request_id_in(body), f"the message is not JSON: {error}")
            return
        except Exception as error:  # a notification whose params cannot be read
            log.warning("unreadable message: %s", error)
            self._server._report_server_error(error, JsonRpcException)
            return
        if not hasattr(message, "jsonrpc"):
            # valid JSON that is no JSON-RPC message: a batch, a number, an object without it
            request_id = message.get("id") if isinstance(message, dict) else None
            self._answer_error(request_id, JsonRpcInvalidRequest("not a JSON-RPC 2.0 message"))
            return
        self.handle_message(message)

    def send_json_text(self, body: str) -> None:
        """Send a message already serialised (see DiagnosticCache: each diagnostic's JSON is
        made once), framed as `_send_data` frames a message it serialises itself."""
        if self.writer is None:
            return
        result = self.writer.write(framed(body))
        if inspect.isawaitable(result):
            asyncio.ensure_future(result)

    def hold_back_answers(self, request_ids: Iterable[int | str]) -> None:
        """Requests that the client has its answers to: the early front answered them before
        the server was loaded. The server handles them to learn what they say (`initialize`:
        the client's capabilities and settings) and sends no second answer."""
        self._answered_early.update(request_ids)

    def _send_response(
        self, msg_id: Any, result: Any | None = None, error: Any | None = None
    ) -> None:
        if msg_id in self._answered_early:
            self._answered_early.discard(msg_id)
            if error is not None:  # the front's answer went out; the server would have refused
                log.error("request %r was answered before the server refused it: %s", msg_id, error)
            return
        super()._send_response(msg_id, result, error)

    def receive_unreadable(self, request_id: int | str | None, reason: str) -> None:
        self._answer_error(request_id, JsonRpcParseError(reason))

    def _answer_error(self, request_id: Any, error: JsonRpcException) -> None:
        if isinstance(request_id, bool) or not isinstance(request_id, int | str):
            request_id = None
        # written by hand: pygls' converter leaves out an id of None, which JSON-RPC requires
        self._send_data(
            {
                "jsonrpc": self.VERSION,
                "id": request_id,
                "error": {"code": error.code, "message": error.message},
            }
        )

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            # json.loads calls this for every object in a message; only the message itself
            # carries "jsonrpc", and only a request carries both an id and a method
            is_request = "id" in data and "method" in data and "error" not in data
            if not is_request or not isinstance(data["id"], (int, str)):
                raise
            # the lifecycle comes first: a request it refuses is refused whatever its params
            error = self._refusal(data["method"]) or error
            log.warning("answering %s %r with %s", data["method"], data["id"], error)
            self._send_response(data["id"], error=error.to_response_error())
            return _AnsweredRequest()

    # ---- lifecycle -------------------------------------------------------------------------
    def handle_message(self, message: Any) -> None:
        if isinstance(message, _AnsweredRequest):
            return
        method = getattr(message, "method", None)
        is_request = method is not None and hasattr(message, "id")
        refusal = self._refusal(method)
        if refusal is not None:
            if is_request:
                log.warning("refusing %s %r: %s", method, message.id, refusal.message)
                self._answer_error(message.id, refusal)
            return
        if message.jsonrpc != self.VERSION and is_request:
            self._answer_error(message.id, JsonRpcInvalidRequest('jsonrpc must be "2.0"'))
            return
        if method == types.INITIALIZE:
            self.initialize_received = True
        elif method == types.SHUTDOWN:
            self.shutdown_received = True
        super().handle_message(message)

    def _refusal(self, method: str | None) -> JsonRpcException | None:
        """Why the lifecycle does not allow this message now (None: it does). Notifications are
        dropped instead of answered; `exit` is always allowed, and so are responses (method
        None): they answer the server's own requests."""
        if method is None or method == types.EXIT:
            return None
        if self.shutdown_received:
            return JsonRpcInvalidRequest("the server is shutting down: only `exit` is accepted")
        if not self.initialize_received:
            if method == types.INITIALIZE:
                return None
            return JsonRpcServerNotInitialized("the server has not received `initialize` yet")
        if method == types.INITIALIZE:
            return JsonRpcInvalidRequest("`initialize` may be sent only once")
        return None

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

    # ---- handlers ----------------------------------------------------------------------------
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
