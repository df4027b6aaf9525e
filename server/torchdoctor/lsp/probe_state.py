"""What the server keeps for the probe: the warm workers, the last report of each document, and
the cancellation events of the probes in flight (by work-done progress token)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from lsprotocol import types

from .probe_bridge import ProbeRunner
from .probe_results import ProbeResults


class ProbeState:
    def __init__(self) -> None:
        self.runner = ProbeRunner()
        self.results = ProbeResults()
        # bumped with every new report, so that pull clients see changed runtime diagnostics
        self.generation = 0
        self._cancel_by_token: dict[types.ProgressToken, asyncio.Event] = {}

    @contextlib.contextmanager
    def cancellable_by(
        self, token: types.ProgressToken | None, cancel: asyncio.Event
    ) -> Iterator[None]:
        """While in the block, `window/workDoneProgress/cancel` for `token` sets `cancel`."""
        if token is None:
            yield
            return
        self._cancel_by_token[token] = cancel
        try:
            yield
        finally:
            self._cancel_by_token.pop(token, None)

    def cancel_progress(self, token: types.ProgressToken) -> None:
        event = self._cancel_by_token.get(token)
        if event is not None:
            event.set()
