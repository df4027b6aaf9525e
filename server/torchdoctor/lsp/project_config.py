"""The analysis configuration of a file: `[tool.torchdoctor]` from the nearest pyproject.toml,
with the editor's settings on top (the editor wins).

Reading and parsing TOML on every keystroke would cost more than some analyses, so the result is
cached per folder and re-read when a pyproject.toml on the way up appears, changes or goes.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

from ..analysis import Config
from ..analysis.config import config_from_mapping, find_pyproject
from .settings import Settings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

Fingerprint = tuple[tuple[str, int], ...]


class ProjectConfigs:
    def __init__(self) -> None:
        self._cache: dict[str, tuple[Fingerprint, Config]] = {}

    def for_file(self, path: str | None, fallback_folder: str | None) -> Config:
        """The file's `[tool.torchdoctor]` config (problems in `Config.warnings`)."""
        folder = os.path.dirname(os.path.abspath(path)) if path else fallback_folder
        if folder is None:
            return Config()
        fingerprint = _fingerprint(folder)
        cached = self._cache.get(folder)
        if cached is not None and cached[0] == fingerprint:
            return cached[1]
        config = _load(Path(folder))
        self._cache[folder] = (fingerprint, config)
        return config

    def clear(self) -> None:
        self._cache.clear()


def _fingerprint(folder: str) -> Fingerprint:
    """Every pyproject.toml from `folder` upwards with its modification time (a few stat calls)."""
    found: list[tuple[str, int]] = []
    current = folder
    while True:
        candidate = os.path.join(current, "pyproject.toml")
        try:
            found.append((candidate, os.stat(candidate).st_mtime_ns))
        except OSError:
            pass
        parent = os.path.dirname(current)
        if parent == current:
            return tuple(found)
        current = parent


def _load(folder: Path) -> Config:
    pyproject = find_pyproject(folder)
    if pyproject is None:
        return Config()
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        return Config(warnings=(f"{pyproject}: not read ({error}); using the defaults",))
    table = data.get("tool", {}).get("torchdoctor", {})
    if not isinstance(table, dict):
        return Config(warnings=(f"{pyproject}: [tool.torchdoctor] is not a table",))
    # strict=False: in the editor a bad entry is skipped and reported, the rest still applies
    return config_from_mapping(table, source=str(pyproject), root=pyproject.parent, strict=False)


def effective_config(project: Config, settings: Settings) -> Config:
    """The project's config with the editor's settings on top, as the CLI's flags do it: `select`
    replaces, `ignore` adds; a severity the editor sets for a code wins over the file's."""
    changes: dict[str, object] = {}
    if settings.select:
        changes["select"] = settings.select
    if settings.ignore:
        changes["ignore"] = project.ignore + settings.ignore
    if settings.severity:
        merged = dict(project.severity)
        merged.update(dict(settings.severity))
        changes["severity"] = tuple(sorted(merged.items(), key=lambda pair: -len(pair[0])))
    return replace(project, **changes) if changes else project
