"""When to analyse: at once, with no fixed delay, and never more than one run per document.

An edit that arrives while the document is being analysed marks it dirty; when the run ends,
one follow-up run takes the latest text, however many edits came in between. A result whose
version (or settings generation) is no longer current is dropped, never published.

A large document takes seconds to analyse; large documents take turns in a lane of their own,
so that however many of them are open, the other documents always have a thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field

from .diagnostics import AnalysisResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AnalysisJob:
    run: Callable[[], AnalysisResult]
    large: bool = False  # runs in the lane for large documents


# Builds the job for a document's current state on the event loop (taking a snapshot of its
# text, version and settings); the job then runs in a worker thread. None: nothing to analyse.
PrepareJob = Callable[[str], AnalysisJob | None]
IsCurrent = Callable[[AnalysisResult], bool]
OnResult = Callable[[AnalysisResult], None]


@dataclass
class _DocumentRuns:
    task: asyncio.Task[None] | None = None
    dirty: bool = False
    result: AnalysisResult | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


class AnalysisScheduler:
    def __init__(
        self,
        *,
        executor: Executor,
        large_executor: Executor,
        prepare: PrepareJob,
        is_current: IsCurrent,
        on_result: OnResult,
    ) -> None:
        self._executor = executor
        self._large_executor = large_executor
        self._prepare = prepare
        self._is_current = is_current
        self._on_result = on_result
        self._runs: dict[str, _DocumentRuns] = {}

    def request(self, uri: str) -> None:
        """Analyse `uri` now, or right after the run in progress."""
        runs = self._runs.setdefault(uri, _DocumentRuns())
        runs.dirty = True
        if runs.task is None:
            runs.task = asyncio.get_running_loop().create_task(self._run(uri, runs))

    def forget(self, uri: str) -> None:
        """The document was closed: drop its results; a run in progress is discarded."""
        runs = self._runs.pop(uri, None)
        if runs is not None:
            runs.dirty = False
            runs.notify()

    def latest(self, uri: str) -> AnalysisResult | None:
        runs = self._runs.get(uri)
        return runs.result if runs is not None else None

    async def current(self, uri: str) -> AnalysisResult | None:
        """The result for the document's current version and settings, waiting for the run
        that computes it; None when the document is not open (or gets closed meanwhile) or
        when a run ends without one (nothing to analyse, or the analysis failed)."""
        requested = False
        while True:
            runs = self._runs.get(uri)
            if runs is None:
                return None
            if runs.result is not None and self._is_current(runs.result):
                return runs.result
            if runs.task is None:
                if requested:
                    return None
                self.request(uri)
                requested = True
            await runs.changed.wait()

    async def _run(self, uri: str, runs: _DocumentRuns) -> None:
        loop = asyncio.get_running_loop()
        try:
            while runs.dirty and self._runs.get(uri) is runs:
                runs.dirty = False
                job = self._prepare(uri)
                if job is None:
                    break
                executor = self._large_executor if job.large else self._executor
                try:
                    result = await loop.run_in_executor(executor, job.run)
                except Exception:
                    log.exception("analysis of %s failed", uri)
                    continue
                if self._runs.get(uri) is not runs:
                    return  # closed while it ran
                if not self._is_current(result):
                    runs.dirty = True  # stale: the edit or setting that made it so is next
                    continue
                runs.result = result
                self._on_result(result)
                runs.notify()
        finally:
            runs.task = None
            # wake waiters even when the loop ended without a current result (job was None)
            runs.notify()
