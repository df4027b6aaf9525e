"""pygls' protocol with two changes.

- Text synchronisation goes to our DocumentStore only: pygls' workspace would keep a second copy
  of every document (and splits lines differently from LSP, see documents.py).
- Command handlers can see the whole `workspace/executeCommand` request: pygls passes them only
  the arguments, and the probe needs the client's workDoneToken to report progress.
- Each request's id is recorded in the context its handler runs in, so a long command can watch
  for the client's `$/cancelRequest` (see request_cancellation.py).
"""

from __future__ import annotations

from collections.abc import Generator
from contextvars import ContextVar
from typing import Any

from lsprotocol import types
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from .request_cancellation import REQUEST_ID

# Set while a workspace/executeCommand request is dispatched; a command handler started by it
# (a task, which copies the context when it is created) reads the request's own params.
EXECUTE_COMMAND_PARAMS: ContextVar[types.ExecuteCommandParams | None] = ContextVar(
    "torchdoctor_execute_command_params", default=None
)


class TorchDoctorProtocol(LanguageServerProtocol):
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
