"""The loop that reads the client's bytes and hands each message to the protocol.

It replaces pygls' `run_async` (see framing.py for why). Reading stdin blocks, so a daemon
thread does it: a thread of an executor would be joined when the process exits, and the server
would then wait for a client that has already sent `exit`. The thread reads the file descriptor
itself: blocked inside `sys.stdin.buffer` it would hold the buffer's lock, and the interpreter
aborts when it finds that lock held at exit.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import threading
from collections.abc import Awaitable, Callable
from typing import BinaryIO, Protocol

from .framing import Body, MessageFramer

log = logging.getLogger("torchdoctor.lsp")

CHUNK_BYTES = 1 << 16
# A client that sent a message it got wrong waits for the answer and sends nothing more: after
# this long with part of a message read, what can be judged unreadable is answered.
STALL_SECONDS = 0.5

ReadChunk = Callable[[], Awaitable[bytes]]  # b"" at the end of input; safe to cancel


class FrameReceiver(Protocol):
    def receive_body(self, body: bytes) -> None: ...

    def receive_unreadable(self, request_id: int | str | None, reason: str) -> None: ...


async def serve_messages(
    read_chunk: ReadChunk, receiver: FrameReceiver, stop: threading.Event
) -> None:
    """Feed `receiver` until the input ends or `stop` is set."""
    framer = MessageFramer()
    while not stop.is_set():
        try:
            chunk = await asyncio.wait_for(read_chunk(), STALL_SECONDS if framer.pending else None)
        except asyncio.TimeoutError:
            frames = framer.stalled()
        else:
            if not chunk:
                return
            frames = framer.feed(chunk)
        for frame in frames:
            try:
                if isinstance(frame, Body):
                    receiver.receive_body(frame.data)
                else:
                    log.warning("unreadable input from the client: %s", frame.reason)
                    receiver.receive_unreadable(frame.request_id, frame.reason)
            except BrokenPipeError:
                raise  # the client has gone: nobody is left to serve
            except Exception:  # one message that breaks the server must not end the serving
                log.exception("could not handle a message")


def stdin_chunks(stdin: BinaryIO) -> ReadChunk:
    """Chunks of `stdin` as they arrive, read by a daemon thread."""
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[bytes] = asyncio.Queue()
    read = _chunk_reader(stdin)

    def pump() -> None:
        while True:
            try:
                chunk = read(CHUNK_BYTES)
            except (OSError, ValueError):  # closed under us
                chunk = b""
            try:
                loop.call_soon_threadsafe(chunks.put_nowait, chunk)
            except RuntimeError:  # the loop has closed: the server is exiting
                return
            if not chunk:
                return

    threading.Thread(target=pump, name="stdin", daemon=True).start()
    return chunks.get


def stream_chunks(reader: asyncio.StreamReader) -> ReadChunk:
    return lambda: reader.read(CHUNK_BYTES)


def _chunk_reader(stdin: BinaryIO) -> Callable[[int], bytes]:
    """A read that returns what has arrived (at least one byte) instead of waiting for `n`."""
    try:
        descriptor = stdin.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):
        read1 = getattr(stdin, "read1", None)
        return read1 if read1 is not None else stdin.read
    return lambda n: os.read(descriptor, n)
