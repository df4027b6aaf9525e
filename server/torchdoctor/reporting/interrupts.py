"""SIGTERM handled like Ctrl-C: the command stops where it is and cleans up on the way out."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Terminated(BaseException):
    """Raised in the main thread when the process receives SIGTERM (a BaseException, like
    KeyboardInterrupt, so that no `except Exception` swallows it)."""

    exit_code = 128 + signal.SIGTERM


@contextmanager
def sigterm_raises() -> Iterator[None]:
    def raise_terminated(signum: int, frame: FrameType | None) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
