"""The thread that reads the client's bytes from stdin, from the first to the last.

Reading stdin blocks, so a daemon thread does it: a thread of an executor would be joined when
the process exits, and the server would then wait for a client that has already sent `exit`.
The thread reads the file descriptor itself: blocked inside `sys.stdin.buffer` it would hold the
buffer's lock, and the interpreter aborts when it finds that lock held at exit.

One thread serves the whole life of the process: first the front that answers before the
protocol library is loaded (early_start.py) takes the chunks from a queue, then the server's
event loop (transport.py) takes over what is left and what comes after, in order.
"""

from __future__ import annotations

import io
import os
import queue
import threading
from collections.abc import Callable
from typing import BinaryIO

CHUNK_BYTES = 1 << 16


class StdinPump:
    def __init__(self, stdin: BinaryIO) -> None:
        self._read = _chunk_reader(stdin)
        # what the front waits on: chunks (b"" at the end of input) and its own wake-ups
        self.queue: queue.Queue[object] = queue.Queue()
        self._lock = threading.Lock()
        self._deliver: Callable[[bytes], None] = self.queue.put

    def start(self) -> None:
        threading.Thread(target=self._pump, name="stdin", daemon=True).start()

    def redirect(self, deliver: Callable[[bytes], None]) -> list[bytes]:
        """From now on chunks go to `deliver`; returns those read but not yet taken, in order.
        Nothing is lost or reordered: a chunk is delivered under the same lock."""
        with self._lock:
            left: list[bytes] = []
            while True:
                try:
                    item = self.queue.get_nowait()
                except queue.Empty:
                    break
                if isinstance(item, bytes):
                    left.append(item)
            self._deliver = deliver
            return left

    def _pump(self) -> None:
        while True:
            try:
                chunk = self._read(CHUNK_BYTES)
            except (OSError, ValueError):  # closed under us
                chunk = b""
            with self._lock:
                try:
                    self._deliver(chunk)
                except RuntimeError:  # the event loop has closed: the server is exiting
                    return
            if not chunk:
                return


def _chunk_reader(stdin: BinaryIO) -> Callable[[int], bytes]:
    """A read that returns what has arrived (at least one byte) instead of waiting for `n`."""
    try:
        descriptor = stdin.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):
        read1 = getattr(stdin, "read1", None)
        return read1 if read1 is not None else stdin.read
    return lambda n: os.read(descriptor, n)
