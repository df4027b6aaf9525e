"""Signatures and docstrings of torch APIs from jedi, for hovers.

jedi inspects the user's interpreter (where their torch lives) through a process of that
interpreter, so torch is never imported here. jedi writes that process's command line (a script of
jedi's own, so the working folder is not on its `sys.path`) but takes its environment from us: it
gets the isolated one, so PYTHONPATH, PYTHONSTARTUP or a user site cannot make it run code.

Loading torch's stubs takes jedi seconds (minutes of CPU on a cold cache), so all jedi work runs
on one background thread: a warm-up starts after `initialized`, and until it is done hovers
answer with the pitfall note alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import time
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from enum import Enum
from functools import partial
from typing import Any

from ..isolation import isolated_environment
from ..probe.interpreters import probe_interpreter
from .worker import DaemonWorker

log = logging.getLogger(__name__)

DOCSTRING_LIMIT = 1500  # characters of docstring in a hover; the rest is a click away in docs
WARM_UP_PROBE = "torch.Tensor.view"


class JediState(str, Enum):
    OFF = "off"
    WARMING = "warming"
    READY = "ready"
    FAILED = "failed"


@dataclass(frozen=True)
class ApiDoc:
    full_name: str
    signatures: tuple[str, ...]
    docstring: str


@dataclass(frozen=True)
class WarmUp:
    interpreter: str
    seconds: float
    found_torch: bool


class JediSupport:
    def __init__(self) -> None:
        self._worker = DaemonWorker("jedi")
        self.state = JediState.OFF
        self._key: tuple[str, str] | None = None  # (interpreter, project root) of the warm-up
        self._project: Any = None
        self._environment: Any = None  # jedi's Environment: its process has the isolated env
        self._cache: dict[str, ApiDoc | None] = {}

    def start(self, interpreter: str, root: str | None) -> Future[WarmUp] | None:
        """Warm jedi up for `interpreter` ("" for jedi's default); None when already done."""
        key = (interpreter, root or os.getcwd())
        if key == self._key and self.state in (JediState.WARMING, JediState.READY):
            return None
        self._key = key
        self.state = JediState.WARMING
        self._cache = {}
        return self._worker.submit(lambda: self._warm_up(key))

    def stop(self) -> None:
        self.state = JediState.OFF
        self._key = None

    def cached(self, qualname: str) -> ApiDoc | None:
        return self._cache.get(qualname)

    async def describe(self, qualname: str, timeout: float) -> ApiDoc | None:
        """jedi's signature and docstring for `qualname`, or None when jedi is not warm or takes
        longer than `timeout` (the look-up then finishes in the background and is cached)."""
        if qualname in self._cache:
            return self._cache[qualname]
        if self.state is not JediState.READY:
            return None
        future = self._worker.submit(lambda: self._describe(qualname))
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout)
        except Exception as error:  # a time-out or a jedi failure: the note alone answers
            log.debug("jedi look-up of %s: %r", qualname, error)
            return None

    def prefetch(self, qualnames: Iterable[str]) -> None:
        """Look names up in the background so that their first hover is complete."""
        for qualname in qualnames:
            self._worker.submit(partial(self._describe, qualname))

    def shutdown(self) -> None:
        self._worker.shutdown()

    # ---- on the jedi thread ------------------------------------------------------------------
    def _warm_up(self, key: tuple[str, str]) -> WarmUp:
        import jedi  # imported here: jedi's import alone costs a tenth of a second at start-up

        interpreter, root = key
        started = time.perf_counter()
        tolerate_truncated_parso_cache()
        try:
            # The interpreter the probe runs in (with no setting: the active virtual or conda
            # environment, else ours), as jedi.get_default_environment() would pick it; but that
            # starts its process with our environment as it is, so the choice is made here.
            # safe=False: the user chose this interpreter; jedi's "safe" check refuses
            # interpreters outside known locations (conda, pyenv shims)
            environment = jedi.create_environment(
                probe_interpreter(interpreter),
                safe=False,
                env_vars=isolated_environment(os.environ),
            )
            # No environment_path: from a path the project would start a second process of its
            # own, with our environment as it is; every Script gets `environment` instead.
            # load_unsafe_extensions=False (jedi's default, spelt out because it matters): the
            # workspace's own files are parsed, never imported; compiled modules are loaded
            # only from the interpreter's sys.path, which the isolated environment keeps free of
            # PYTHONPATH folders
            self._environment = environment
            self._project = jedi.Project(root, load_unsafe_extensions=False)
            doc = self._look_up(WARM_UP_PROBE)  # raises: a broken jedi is not "no torch"
            self._cache[WARM_UP_PROBE] = doc
        except Exception:
            if self._key == key:
                self.state = JediState.FAILED
            raise
        if self._key == key:
            self.state = JediState.READY
        return WarmUp(environment.executable, time.perf_counter() - started, doc is not None)

    def _describe(self, qualname: str) -> ApiDoc | None:
        if qualname in self._cache:
            return self._cache[qualname]
        try:
            doc = self._look_up(qualname)
        except Exception:
            log.exception("jedi could not look up %s", qualname)
            doc = None
        self._cache[qualname] = doc
        return doc

    def _look_up(self, qualname: str) -> ApiDoc | None:
        import jedi

        module, _, _ = qualname.rpartition(".")
        # `import torch.nn.functional` makes jedi load exactly the module the name lives in;
        # for a class attribute (torch.Tensor.view) the import of the package is enough
        source = f"import {_importable(module)}\n{qualname}"
        script = jedi.Script(
            source,
            path="torchdoctor_hover.py",
            project=self._project,
            environment=self._environment,
        )
        names = script.infer(2, len(qualname))
        return _api_doc(names[0]) if names else None


def tolerate_truncated_parso_cache() -> None:
    """Make an unreadable parso cache file a cache miss.

    parso pickles parsed stubs into its cache folder in place; a process killed in the middle
    (an editor quitting while jedi warms up) leaves a truncated file, and every later load of it
    fails with EOFError until the source changes, so hovers would never get signatures again.
    The file is removed and parsed afresh instead. Idempotent; skipped if parso changes.
    """
    try:
        import parso.cache as parso_cache
    except ImportError:
        return
    original = getattr(parso_cache, "_load_from_file_system", None)
    hashed_path = getattr(parso_cache, "_get_hashed_path", None)
    if original is None or hashed_path is None or getattr(original, "_torchdoctor", False):
        return

    def load(hashed_grammar: Any, path: Any, p_time: Any, cache_path: Any = None) -> Any:
        try:
            return original(hashed_grammar, path, p_time, cache_path=cache_path)
        except (EOFError, pickle.UnpicklingError, AttributeError, ImportError, ValueError):
            with contextlib.suppress(OSError):
                os.remove(hashed_path(hashed_grammar, path, cache_path=cache_path))
            return None

    load._torchdoctor = True  # type: ignore[attr-defined]  # a marker on a plain function
    parso_cache._load_from_file_system = load


def _importable(module: str) -> str:
    """The longest prefix of `module` that is a module rather than a class (`torch.Tensor` is a
    class): names after the first capitalised part are attributes."""
    parts = module.split(".")
    for index, part in enumerate(parts):
        if part[:1].isupper():
            return ".".join(parts[:index]) or parts[0]
    return module


def _api_doc(name: Any) -> ApiDoc:
    try:
        signatures = tuple(signature.to_string() for signature in name.get_signatures())
    except Exception:
        signatures = ()
    docstring = name.docstring(raw=True) or ""
    if len(docstring) > DOCSTRING_LIMIT:
        cut = docstring.rfind("\n\n", 0, DOCSTRING_LIMIT)
        docstring = docstring[: cut if cut > 0 else DOCSTRING_LIMIT].rstrip() + "\n\n…"
    return ApiDoc(name.full_name or name.name, signatures[:4], docstring.strip())
