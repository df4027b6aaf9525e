"""The loop that reads the client's bytes and hands each message to the protocol.

It replaces pygls' `run_async` (see framing.py for why); stdin is read by the thread in
stdin_pump.py.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from .early_start import SentDiagnostics
from .framing import STALL_SECONDS, Frame, FrameReceiver, MessageFramer, deliver_frames
from .stdin_pump import CHUNK_BYTES, StdinPump

log = logging.getLogger("torchdoctor.lsp")

ReadChunk = Callable[[], Awaitable[bytes]]  # b"" at the end of input; safe to cancel


class TakingOver(FrameReceiver, Protocol):
    def hold_back_answers(self, request_ids: Iterable[int | str]) -> None: ...


async def serve_messages(
    read_chunk: ReadChunk,
    receiver: FrameReceiver,
    stop: threading.Event,
    framer: MessageFramer | None = None,
) -> None:
    """Feed `receiver` until the input ends or `stop` is set; `framer`: one that has already
    read the start of the stream (it may hold part of a message)."""
    framer = framer or MessageFramer()
    while not stop.is_set():
        try:
            chunk = await asyncio.wait_for(read_chunk(), STALL_SECONDS if framer.pending else None)
        except asyncio.TimeoutError:
            frames = framer.stalled()
        else:
            if not chunk:
                return
            frames = framer.feed(chunk)
        deliver_frames(frames, receiver)


def pump_chunks(pump: StdinPump) -> ReadChunk:
    """The pump's chunks, from those it read before this call on, on the running event loop."""
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[bytes] = asyncio.Queue()

    def deliver(chunk: bytes) -> None:
        loop.call_soon_threadsafe(chunks.put_nowait, chunk)

    for chunk in pump.redirect(deliver):
        chunks.put_nowait(chunk)
    return chunks.get


def stream_chunks(reader: asyncio.StreamReader) -> ReadChunk:
    return lambda: reader.read(CHUNK_BYTES)


@dataclass(frozen=True)
class Takeover:
    """Where the early front (early_start.py) leaves the input to the server."""

    pump: StdinPump  # goes on reading stdin
    framer: MessageFramer  # has read everything the front received; may hold part of a message
    replay: list[Frame]  # what the front received, for the server to handle, in order
    answered: list[int | str]  # requests among them the front has answered already
    sent: dict[str, SentDiagnostics]  # the diagnostics the client has from the front
    ended: bool  # the input ended while the front read it

    @classmethod
    def of_nothing(cls, stdin: BinaryIO) -> Takeover:
        """Serving `stdin` from its first byte, with no front before."""
        pump = StdinPump(stdin)
        pump.start()
        return cls(pump, MessageFramer(), [], [], {}, ended=False)


async def no_more_input() -> bytes:
    return b""


async def take_over(takeover: Takeover, receiver: TakingOver, stop: threading.Event) -> None:
    """Serve from where the front stopped: its messages first, then the rest of the input."""
    read_chunk = no_more_input if takeover.ended else pump_chunks(takeover.pump)
    receiver.hold_back_answers(takeover.answered)
    deliver_frames(takeover.replay, receiver)
    await serve_messages(read_chunk, receiver, stop, takeover.framer)
