"""A one-thread executor whose thread does not keep the process alive.

jedi can spend seconds loading torch's stubs; a ThreadPoolExecutor's thread is joined at exit,
so a server whose client has gone would linger until the warm-up finished.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)


class DaemonWorker:
    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = False
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if not self._started:
                self._thread.start()
                self._started = True
        self._jobs.put((future, job))
        return future

    def shutdown(self) -> None:
        self._jobs.put(None)

    def _run(self) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                return
            future, job = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job())
            except Exception as error:  # handed to whoever awaits the future
                future.set_exception(error)
