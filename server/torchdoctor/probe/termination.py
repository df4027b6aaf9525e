"""SIGTERM and SIGHUP stop `torchdoctor probe` the way Ctrl-C does.

`timeout`, CI cancellation and process managers send SIGTERM; closing a terminal sends SIGHUP.
Their default action ends the CLI at once, before the client can kill the runner's process
group (a session of its own, so the signal never reaches it). Here they cancel the probe's
task instead: the client's cancellation path kills the runner and everything under it, and
the CLI then exits with 128 + the signal's number, as a shell reports a killed command.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
STOPPING_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class StoppedBySignal(Exception):
    """The probe was cancelled because the CLI received `signum`."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


async def cancelled_by_signals(work: Coroutine[Any, Any, T]) -> T:
    """Await `work`; SIGTERM or SIGHUP cancels it and raises StoppedBySignal once its
    clean-up (the runner's kill) has run."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    received: list[int] = []

    def stop(signum: int) -> None:
        received.append(signum)
        task.cancel()

    installed = []
    for signum in STOPPING_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, stop, signum)
            installed.append(signum)
    try:
        return await task
    except asyncio.CancelledError:
        if received:
            raise StoppedBySignal(received[0]) from None
        raise
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
