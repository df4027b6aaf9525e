"""`torchdoctor serve`: the start of the language server.

Over stdio the early front (early_start.py) reads and answers the first messages while another
thread imports the server; the server then takes over the input (transport.take_over). Over TCP,
a debugging aid, the server starts directly.
"""

from __future__ import annotations

import importlib
import logging
import os
import queue
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import BinaryIO

from ..analysis.gc_pause import gc_paused
from .early_start import EarlyFront
from .framing import STALL_SECONDS, MessageFramer, deliver_frames, framed
from .stdin_pump import StdinPump
from .threadsafe_ast import serialise_ast_parse

log = logging.getLogger("torchdoctor.lsp")

# While an analysis holds the GIL, the event-loop thread waits up to one switch interval for
# each message it handles (5 ms by default): a burst of keystrokes then queues up behind the
# analysis. A shorter interval lets edits and hovers through at once.
SWITCH_INTERVAL = 0.0005
# After `initialize` the server starts loading once the client has been quiet this long (the
# documents it opens first are analysed without the import competing for the processor) ...
QUIET_BEFORE_LOADING = 0.05
# ... or this long after `initialize` however busy the client is
LOADING_DEADLINE = 0.5


def serve(tcp: str | None = None, log_file: Path | str | None = None) -> int:
    """Run the language server over stdio (or TCP for debugging) until the client goes away."""
    configure_logging(log_file)
    serialise_ast_parse()
    sys.setswitchinterval(SWITCH_INTERVAL)
    if tcp:
        from .server import build_server, exit_code

        server = build_server()
        try:
            host, _, port = tcp.rpartition(":")
            server.start_tcp(host or "127.0.0.1", int(port))
        finally:
            server.close()
        return exit_code(server)
    return serve_stdio(sys.stdin.buffer, sys.stdout.buffer)


def serve_stdio(stdin: BinaryIO, stdout: BinaryIO) -> int:
    pump = StdinPump(stdin)
    pump.start()
    front = EarlyFront(send=lambda text: write_message(stdout, text))
    framer = MessageFramer()
    loader = ServerLoader(pump.queue)
    try:
        ended = _serve_early(pump, front, framer, loader)
    except BrokenPipeError:
        log.error("the client has gone (broken pipe)")
        return 0
    from .transport import Takeover  # imported by the loader by now

    module = loader.module()
    server = module.build_server()
    takeover = Takeover(pump, framer, front.replay(), front.answered(), front.sent(), ended)
    try:
        server.start_io(stdout=stdout, takeover=takeover)
    finally:
        server.close()
    return int(module.exit_code(server))


def _serve_early(
    pump: StdinPump, front: EarlyFront, framer: MessageFramer, loader: ServerLoader
) -> bool:
    """Let the front serve until the server is loaded; True if the input ended meanwhile."""
    ended = False
    initialized_at: float | None = None
    while True:
        if front.initialized and initialized_at is None:
            initialized_at = time.monotonic()
        if initialized_at is not None and time.monotonic() - initialized_at > LOADING_DEADLINE:
            loader.start()
        try:
            item = pump.queue.get(timeout=_wait(front, framer, loader))
        except queue.Empty:
            if front.pending:
                front.work()
            elif framer.pending:
                deliver_frames(framer.stalled(), front)
            elif front.initialized:
                loader.start()  # the client is quiet
            if front.wants_server:
                loader.start()
            continue
        if item is ServerLoader.LOADED:
            return ended
        assert isinstance(item, bytes)
        if not item:
            ended = True  # the server still handles what came, then sees the end
            loader.start()
            continue
        deliver_frames(framer.feed(item), front)
        if pump.queue.empty():  # analyse once what came in a burst has been read
            front.work()
        if front.wants_server:
            loader.start()


def _wait(front: EarlyFront, framer: MessageFramer, loader: ServerLoader) -> float | None:
    if front.pending:
        return 0.0  # a look for new messages between two documents
    if framer.pending:
        return STALL_SECONDS
    if front.initialized and not loader.started:
        return QUIET_BEFORE_LOADING
    return None


class ServerLoader:
    """Imports the server on a thread of its own and says so on `wake` when done."""

    LOADED = object()

    def __init__(self, wake: queue.Queue[object]) -> None:
        self._wake = wake
        self._thread: threading.Thread | None = None
        self._module: ModuleType | None = None
        self._error: BaseException | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._load, name="server-import", daemon=True)
            self._thread.start()

    def module(self) -> ModuleType:
        """The server module; raises what its import raised."""
        if self._error is not None:
            raise self._error
        assert self._module is not None
        return self._module

    def _load(self) -> None:
        try:
            # Without collections: the import builds lsprotocol's classes and their methods,
            # hundreds of thousands of objects that live as long as the process, and each
            # collection meanwhile scanned them all again (the import took 12% longer). Frozen
            # afterwards, later collections skip them too.
            with gc_paused(freeze=True):
                module = importlib.import_module(".server", __package__)
                importlib.import_module(".features", __package__)
                importlib.import_module(".notebooks", __package__)
            self._module = module
        except BaseException as error:  # handed to the main thread, which raises it
            self._error = error
        finally:
            self._wake.put(self.LOADED)


def write_message(stdout: BinaryIO, text: str) -> None:
    stdout.write(framed(text))
    stdout.flush()


def configure_logging(log_file: Path | str | None) -> None:
    handler: logging.Handler
    if log_file is not None:
        handler = logging.FileHandler(log_file, encoding="utf-8")
    else:
        # stdout carries the protocol; the log goes to stderr, which editors show as the log
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    level = os.environ.get("TORCHDOCTOR_LOG_LEVEL", "INFO").upper()
    logging.getLogger("torchdoctor").setLevel(getattr(logging, level, logging.INFO))
