"""Configuration: `[tool.torchdoctor]` in the nearest pyproject.toml, plus overrides from the
command line or the editor. Unknown keys and bad values are reported, never silently dropped."""

from __future__ import annotations

import fnmatch
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath
from typing import Any

from .findings import REGISTRY, Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

KNOWN_KEYS = {
    "select": 'list of rule codes or prefixes to enable ("ALL" for every rule)',
    "extend-select": "codes or prefixes enabled on top of `select`",
    "ignore": "list of rule codes or prefixes to disable",
    "per-file-ignores": "table of glob pattern -> list of codes ignored in matching files",
    "severity": "table of code -> error | warning | information | hint",
    "target-torch": 'torch version the code targets, e.g. "2.13"',
    "exclude": "gitignore-style patterns of paths `check` skips",
}
NEWEST_TORCH = (2, 13)


class ConfigError(ValueError):
    """A configuration problem, worded for the user; a problem in a file says where (1-based
    line and column, when the file's syntax is what is wrong), so the editor can point at it."""

    def __init__(
        self,
        message: str,
        *,
        path: Path | None = None,
        line: int | None = None,
        column: int | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        # what is wrong, without the file and position (a diagnostic in that file shows those)
        self.reason = reason or message
        self.path = path
        self.line = line
        self.column = column


@dataclass(frozen=True)
class Config:
    select: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    severity: tuple[tuple[str, Severity], ...] = ()
    target_torch: tuple[int, int] | None = None
    exclude: tuple[str, ...] = ()
    root: Path | None = None  # folder of the pyproject.toml the settings came from
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def enabled_codes(self, path: str | None = None) -> frozenset[str]:
        """The rule codes that run on `path` under this configuration."""
        if self.select:
            chosen = {info.code for info in REGISTRY if _matches_any(info.code, self.select)}
        else:
            chosen = {info.code for info in REGISTRY if info.enabled_by_default}
        chosen |= {info.code for info in REGISTRY if _matches_any(info.code, self.extend_select)}
        ignored = set(self.ignore)
        if path is not None:
            ignored |= set(self.ignored_for_path(path))
        return frozenset(code for code in chosen if not _matches_any(code, tuple(ignored)))

    def ignored_for_path(self, path: str) -> list[str]:
        relative = self._relative(path)
        codes: list[str] = []
        for pattern, pattern_codes in self.per_file_ignores:
            if _path_matches(relative, pattern):
                codes.extend(pattern_codes)
        return codes

    def severity_for(self, code: str, default: Severity) -> Severity:
        for prefix, severity in self.severity:
            if code.startswith(prefix):
                return severity
        return default

    @property
    def torch_version(self) -> tuple[int, int]:
        return self.target_torch or NEWEST_TORCH

    def _relative(self, path: str) -> str:
        pure = PurePath(path)
        if self.root is not None:
            try:
                return Path(path).resolve().relative_to(self.root.resolve()).as_posix()
            except (ValueError, OSError):
                pass
        return pure.as_posix()


def _matches_any(code: str, prefixes: tuple[str, ...] | list[str]) -> bool:
    return any(prefix == "ALL" or code.startswith(prefix) for prefix in prefixes)


def _path_matches(relative: str, pattern: str) -> bool:
    if fnmatch.fnmatch(relative, pattern):
        return True
    # a bare file-name pattern matches in any folder, as in ruff and flake8
    return "/" not in pattern and fnmatch.fnmatch(PurePath(relative).name, pattern)


@dataclass(frozen=True)
class ConfigFile:
    """The `[tool.torchdoctor]` table of a pyproject.toml, and where it came from."""

    path: Path
    table: dict[str, Any]


def find_config_file(start: Path) -> ConfigFile | None:
    """The nearest pyproject.toml with a [tool.torchdoctor] table, from `start` upwards, each
    file read and parsed once. A file that is not valid TOML but names `tool.torchdoctor` is
    the configuration the user meant: ConfigError, with its line and column, not a silent
    fall-back to the defaults. Other unreadable pyproject.toml files belong to other tools."""
    folder = start if start.is_dir() else start.parent
    for candidate_folder in (folder, *folder.parents):
        candidate = candidate_folder / "pyproject.toml"
        try:
            data = candidate.read_bytes()
        except OSError:  # absent (the common case), a folder, or unreadable
            continue
        table = _torchdoctor_table(candidate, data)
        if table is not None:
            return ConfigFile(candidate, table)
    return None


TOOL_TABLE = re.compile(rb"^\s*\[+\s*tool\s*\.\s*[\"']?torchdoctor\b", re.MULTILINE)
TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def _torchdoctor_table(path: Path, data: bytes) -> dict[str, Any] | None:
    ours = TOOL_TABLE.search(data) is not None
    try:
        document = tomllib.loads(data.decode("utf-8-sig"))  # a BOM is no reason to fail
    except UnicodeDecodeError as error:
        if not ours:
            return None
        bad_line = data[: error.start].count(b"\n") + 1
        reason = "not valid UTF-8 (TOML files must be)"
        raise ConfigError(
            f"{path}:{bad_line}: {reason}", path=path, line=bad_line, reason=reason
        ) from None
    except tomllib.TOMLDecodeError as error:
        if not ours:
            return None
        what, line, column = _toml_error_position(error)
        where = f"{path}:{line}:{column}" if line else str(path)
        reason = f"not valid TOML: {what}"
        raise ConfigError(
            f"{where}: {reason}", path=path, line=line, column=column, reason=reason
        ) from None
    tool = document.get("tool")
    if not isinstance(tool, dict) or "torchdoctor" not in tool:
        return None
    table = tool["torchdoctor"]
    if not isinstance(table, dict):
        reason = "`tool.torchdoctor` must be a table"
        raise ConfigError(f"{path}: {reason}", path=path, reason=reason)
    return table


def _toml_error_position(error: tomllib.TOMLDecodeError) -> tuple[str, int | None, int | None]:
    """The message without its position, and the position (tomllib puts it in the message
    before Python 3.14, which adds `lineno` and `colno`)."""
    text = str(error.args[0] if error.args else error)
    match = TOML_POSITION.search(text)
    if match is None:
        return text, getattr(error, "lineno", None), getattr(error, "colno", None)
    return text[: match.start()], int(match.group(1)), int(match.group(2))


def load_config(start: Path, *, strict: bool = True) -> Config:
    """The configuration that applies to `start` (a file or folder). A file that cannot be
    parsed raises ConfigError; `strict`: so does any bad entry, otherwise the bad entries are
    skipped and listed in `Config.warnings` (the editor keeps working while the user types)."""
    found = find_config_file(start.resolve())
    if found is None:
        return Config()
    return config_from_mapping(
        found.table, source=str(found.path), root=found.path.parent, strict=strict
    )


def config_from_mapping(
    table: dict[str, Any], *, source: str, root: Path | None = None, strict: bool = True
) -> Config:
    """Build a Config from a `[tool.torchdoctor]`-shaped mapping.

    strict: raise ConfigError on the first problem (the CLI); otherwise skip the bad entry,
    keep the rest, and list what was wrong in `Config.warnings` (the editor).
    """
    problems: list[str] = []
    values: dict[str, Any] = {}
    for key, value in table.items():
        normalised = key.replace("_", "-")
        if normalised not in KNOWN_KEYS:
            known = ", ".join(sorted(KNOWN_KEYS))
            problems.append(f"{source}: unknown key `{key}` (known keys: {known})")
            continue
        try:
            values[normalised] = _parse_value(normalised, value)
        except ConfigError as error:
            problems.append(f"{source}: `{key}`: {error}")
    if problems and strict:
        raise ConfigError("\n".join(problems))
    return Config(
        select=values.get("select", ()),
        extend_select=values.get("extend-select", ()),
        ignore=values.get("ignore", ()),
        per_file_ignores=values.get("per-file-ignores", ()),
        severity=values.get("severity", ()),
        target_torch=values.get("target-torch"),
        exclude=values.get("exclude", ()),
        root=root,
        warnings=tuple(problems),
    )


def _parse_value(key: str, value: Any) -> Any:
    if key in ("select", "extend-select", "ignore"):
        return tuple(_codes(value))
    if key == "exclude":
        return tuple(_strings(value))
    if key == "per-file-ignores":
        if not isinstance(value, dict):
            raise ConfigError("expected a table of pattern = [codes]")
        return tuple((str(pattern), tuple(_codes(codes))) for pattern, codes in value.items())
    if key == "severity":
        if not isinstance(value, dict):
            raise ConfigError("expected a table of code = severity")
        pairs = []
        for code, severity in value.items():
            _check_code(str(code))
            try:
                pairs.append((str(code), Severity(str(severity).lower())))
            except ValueError:
                raise ConfigError(
                    f"severity of {code} must be error, warning, information or hint, "
                    f"not {severity!r}"
                ) from None
        # longer prefixes first, so `TD101` overrides `TD1`
        return tuple(sorted(pairs, key=lambda pair: -len(pair[0])))
    if key == "target-torch":
        return parse_version(str(value))
    raise ConfigError("unsupported key")  # pragma: no cover - guarded by KNOWN_KEYS


def parse_version(text: str) -> tuple[int, int]:
    parts = text.strip().lstrip("v").split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise ConfigError(f'expected a version like "2.13", not {text!r}') from None


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError("expected a list of strings")
    return list(value)


def _codes(value: Any) -> list[str]:
    codes = [code.strip().upper() for code in _strings(value)]
    for code in codes:
        _check_code(code)
    return codes


def _check_code(code: str) -> None:
    if code == "ALL":
        return
    if not code.startswith("TD") or not any(info.code.startswith(code) for info in REGISTRY):
        raise ConfigError(f"`{code}` matches no rule (see `torchdoctor rules`)")


def with_overrides(
    config: Config,
    *,
    select: Sequence[str] | None = None,
    extend_select: Sequence[str] | None = None,
    ignore: Sequence[str] | None = None,
    severity: Sequence[tuple[str, Severity]] = (),
) -> Config:
    """Command-line or editor settings on top of the file's: `select` replaces, `extend_select`
    and `ignore` add, a severity set for a code wins over the file's for that code."""
    changes: dict[str, Any] = {}
    if select:
        changes["select"] = tuple(_codes(list(select)))
    if extend_select:
        changes["extend_select"] = config.extend_select + tuple(_codes(list(extend_select)))
    if ignore:
        changes["ignore"] = config.ignore + tuple(_codes(list(ignore)))
    if severity:
        merged = dict(config.severity)
        merged.update(dict(severity))
        # longer prefixes first, so `TD101` overrides `TD1`
        changes["severity"] = tuple(sorted(merged.items(), key=lambda pair: -len(pair[0])))
    return replace(config, **changes) if changes else config
