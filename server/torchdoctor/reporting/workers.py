"""Worker processes for `check`: they only read and compute; the parent process writes.

With every write in one process, writes happen in order, and stopping the parent stops the
writing. The workers are ended with the pool: on Ctrl-C and SIGTERM (the parent terminates
them on its way out) and, on Linux, when the parent dies without a chance to (`kill -9`): the
kernel then sends them SIGKILL.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from multiprocessing.pool import Pool
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


@contextmanager
def results_in_order(
    function: Callable[[Item], Result], items: Iterable[Item], workers: int, chunksize: int
) -> Iterator[Iterator[Result]]:
    """`map(function, items)` computed by `workers` processes, its results in order as they
    come. However the `with` block is left (done, a signal, an exception), the workers are
    terminated and reaped before it returns."""
    pool = _start_pool(workers)
    try:
        yield pool.imap(function, items, chunksize)
    finally:
        pool.terminate()
        pool.join()


def _start_pool(workers: int) -> Pool:
    # fork is the cheapest start and the parent runs no threads; elsewhere the default
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
    context = multiprocessing.get_context(method)
    return context.Pool(workers, initializer=_start_worker, initargs=(os.getpid(),))


def _start_worker(parent: int) -> None:
    # Ctrl-C reaches the whole process group: the parent decides, the workers do not print
    # tracebacks; SIGTERM (sent by `Pool.terminate`) ends a worker at once, whatever handler
    # the parent had installed when it forked
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request above took effect
        os._exit(1)
