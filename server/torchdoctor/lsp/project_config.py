"""The analysis configuration of a file: `[tool.torchdoctor]` from the nearest pyproject.toml,
with the editor's settings on top (the editor wins).

Reading and parsing TOML on every keystroke would cost more than some analyses, so the result is
cached per folder and re-read when a pyproject.toml on the way up appears, changes or goes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from ..analysis import Config, ConfigError
from ..analysis.config import load_config, with_overrides
from ..probe.interpreters import probe_interpreter
from ..torch_install import installed_torch_version
from .settings import Settings

Fingerprint = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ProjectConfig:
    """A file's configuration; `error`: the pyproject.toml could not be read at all (its
    syntax), so the defaults apply and the editor must say so, at the line."""

    config: Config
    error: ConfigError | None = None


class ProjectConfigs:
    def __init__(self) -> None:
        self._cache: dict[str, tuple[Fingerprint, ProjectConfig]] = {}

    def for_file(self, path: str | None, fallback_folder: str | None) -> ProjectConfig:
        """The file's `[tool.torchdoctor]` config (bad entries in `Config.warnings`)."""
        folder = os.path.dirname(os.path.abspath(path)) if path else fallback_folder
        if folder is None:
            return ProjectConfig(Config())
        fingerprint = _fingerprint(folder)
        cached = self._cache.get(folder)
        if cached is not None and cached[0] == fingerprint:
            return cached[1]
        loaded = _load(Path(folder))
        self._cache[folder] = (fingerprint, loaded)
        return loaded

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


def _load(folder: Path) -> ProjectConfig:
    try:
        # strict=False: in the editor a bad entry is skipped and reported, the rest applies
        return ProjectConfig(load_config(folder, strict=False))
    except ConfigError as error:
        return ProjectConfig(Config(warnings=(f"{error}; using the defaults",)), error)


def effective_config(project: Config, settings: Settings) -> Config:
    """The project's config with the editor's settings on top, as the CLI's flags do it."""
    return with_overrides(
        project, select=settings.select, ignore=settings.ignore, severity=settings.severity
    )


def editor_config(project: Config, settings: Settings) -> Config:
    """`effective_config`; where the project names no torch release, version-dependent rules
    follow the torch installed in the user's interpreter (asked once per interpreter; torch is
    not imported)."""
    config = effective_config(project, settings)
    if config.target_torch is None:
        interpreter = probe_interpreter(settings.interpreter)
        config = replace(config, target_torch=installed_torch_version(interpreter))
    return config
