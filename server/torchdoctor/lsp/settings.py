"""Editor settings: the `torchdoctor` section of the client's configuration.

They arrive in `initializationOptions.settings`, in answers to `workspace/configuration` and in
`workspace/didChangeConfiguration`. A bad value never stops the server: the key falls back to
its default and the problem is reported to the user in words.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..analysis import REGISTRY, Severity

SECTION = "torchdoctor"
LOCALES = ("auto", "en", "zh-CN")
DEVICES = ("auto", "cpu", "cuda")
SHAPE_HINT_SCOPES = ("everyLine", "submodules")
MAX_DOCUMENT_SIZE = 2 * 1024 * 1024  # bytes of UTF-8; parsing 2 MiB of Python takes about a second


@dataclass(frozen=True)
class ProbeSettings:
    device: str = "auto"
    iters: int = 20
    timeout: float = 120.0
    # MiB of address space for probes started from the editor; None: half the machine's
    # memory (see probe_bridge.probe_memory_limit), 0: no limit
    memory_limit: int | None = None


@dataclass(frozen=True)
class Settings:
    enable: bool = True
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    severity: tuple[tuple[str, Severity], ...] = ()
    locale: str = "auto"
    # the user's Python (where their torch lives): jedi inspects it, the probe runs in it
    interpreter: str = ""
    code_lens: bool = True
    inlay_hints: bool = True
    # shapes from the probe: on every line that bound a tensor, or on submodule calls only
    shape_hints: str = "everyLine"
    # jedi needs seconds of CPU to load torch's stubs; on a slow machine users may turn it off
    hover_signatures: bool = True
    # documents past this many bytes are not analysed (0: no limit)
    max_document_size: int = MAX_DOCUMENT_SIZE
    probe: ProbeSettings = field(default_factory=ProbeSettings)


@dataclass(frozen=True)
class ParsedSettings:
    settings: Settings
    problems: tuple[str, ...]


# editor key → dataclass field; both camelCase (VS Code) and snake_case are accepted
KEYS = {
    "enable": "enable",
    "select": "select",
    "ignore": "ignore",
    "severity": "severity",
    "locale": "locale",
    "interpreter": "interpreter",
    "codeLens": "code_lens",
    "code_lens": "code_lens",
    "inlayHints": "inlay_hints",
    "inlay_hints": "inlay_hints",
    "shapeHints": "shape_hints",
    "shape_hints": "shape_hints",
    "hoverSignatures": "hover_signatures",
    "hover_signatures": "hover_signatures",
    "maxDocumentSize": "max_document_size",
    "max_document_size": "max_document_size",
    "probe": "probe",
}
PROBE_KEYS = ("device", "iters", "timeout", "memoryLimit", "memory_limit")
MIN_PROBE_MEMORY_MIB = 256  # less cannot even import torch
IGNORED_KEYS = {"trace"}  # `torchdoctor.trace.server` belongs to the VS Code client


def parse_settings(raw: Any) -> ParsedSettings:
    """Settings from a client's `torchdoctor` object; problems say what was wrong."""
    problems: list[str] = []
    if raw is None:
        return ParsedSettings(Settings(), ())
    if not isinstance(raw, Mapping):
        return ParsedSettings(Settings(), (f"expected an object, got {_describe(raw)}",))
    values: dict[str, Any] = {}
    probe_raw: dict[str, Any] = {}
    for key, value in _flatten_dotted(raw).items():
        if key.startswith("probe."):
            probe_raw[key.removeprefix("probe.")] = value
            continue
        if key in IGNORED_KEYS:
            continue
        name = KEYS.get(key)
        if name is None:
            problems.append(f"unknown setting `{key}` (ignored)")
            continue
        if name == "probe":
            if isinstance(value, Mapping):
                probe_raw.update(value)
            elif value is not None:
                problems.append(f"`probe` must be an object, not {_describe(value)}")
            continue
        try:
            values[name] = _PARSERS[name](value)
        except SettingError as error:
            problems.append(f"`{key}`: {error}; using the default")
    probe = _parse_probe(probe_raw, problems)
    return ParsedSettings(Settings(**values, probe=probe), tuple(problems))


class SettingError(ValueError):
    pass


def _flatten_dotted(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Accept `{"probe.device": "cpu"}` as well as `{"probe": {"device": "cpu"}}`."""
    flat: dict[str, Any] = {}
    for key, value in raw.items():
        key = str(key)
        if key.startswith(f"{SECTION}."):
            key = key[len(SECTION) + 1 :]
        if key.startswith("trace."):
            continue
        flat[key] = value
    return flat


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise SettingError(f"expected true or false, not {_describe(value)}")


def _codes(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [part for part in value.replace(",", " ").split() if part]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise SettingError(f"expected a list of rule codes, not {_describe(value)}")
    codes = [code.strip().upper() for code in value]
    unknown = [code for code in codes if not _is_known_code(code)]
    if unknown:
        raise SettingError(
            f"{', '.join(repr(code) for code in unknown)} matches no rule "
            "(codes look like TD101; a prefix such as TD1 or ALL also works)"
        )
    return tuple(codes)


def _is_known_code(code: str) -> bool:
    if code == "ALL":
        return True
    return code.startswith("TD") and any(info.code.startswith(code) for info in REGISTRY)


def _severity(value: Any) -> tuple[tuple[str, Severity], ...]:
    if not isinstance(value, Mapping):
        raise SettingError(f"expected an object of code → level, not {_describe(value)}")
    pairs: list[tuple[str, Severity]] = []
    bad: list[str] = []
    for code, level in value.items():
        code = str(code).strip().upper()
        text = str(level).strip().lower()
        text = {"info": "information", "warn": "warning"}.get(text, text)
        if not _is_known_code(code) or code == "ALL":
            bad.append(f"{code!r} matches no rule")
            continue
        try:
            pairs.append((code, Severity(text)))
        except ValueError:
            bad.append(f"{code}: {level!r} is not error, warning, information or hint")
    if bad:
        raise SettingError("; ".join(bad))
    return tuple(sorted(pairs, key=lambda pair: -len(pair[0])))


def _locale(value: Any) -> str:
    if isinstance(value, str):
        for locale in LOCALES:
            if value.strip().lower() == locale.lower():
                return locale
    raise SettingError(f"expected one of {', '.join(LOCALES)}, not {_describe(value)}")


def _interpreter(value: Any) -> str:
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise SettingError(f"expected the path of a Python executable, not {_describe(value)}")
    path = os.path.expanduser(value)
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise SettingError(f"{value!r} is not an executable file")
    return path


def _shape_hints(value: Any) -> str:
    if value in SHAPE_HINT_SCOPES:
        return str(value)
    raise SettingError(f"expected everyLine or submodules, not {_describe(value)}")


def _byte_count(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise SettingError(f"expected a number of bytes (0: no limit), not {_describe(value)}")


_PARSERS = {
    "enable": _boolean,
    "select": _codes,
    "ignore": _codes,
    "severity": _severity,
    "locale": _locale,
    "interpreter": _interpreter,
    "code_lens": _boolean,
    "inlay_hints": _boolean,
    "shape_hints": _shape_hints,
    "hover_signatures": _boolean,
    "max_document_size": _byte_count,
}


def _parse_probe(raw: Mapping[str, Any], problems: list[str]) -> ProbeSettings:
    defaults = ProbeSettings()
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in PROBE_KEYS:
            problems.append(f"unknown setting `probe.{key}` (ignored)")
            continue
        if key == "device":
            if isinstance(value, str) and value in DEVICES:
                values["device"] = value
            else:
                problems.append(
                    f"`probe.device`: expected auto, cpu or cuda, not {_describe(value)}; "
                    f"using {defaults.device!r}"
                )
        elif key == "iters":
            if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 1000:
                values["iters"] = value
            else:
                problems.append(
                    f"`probe.iters`: expected a whole number from 1 to 1000, not "
                    f"{_describe(value)}; using {defaults.iters}"
                )
        elif key in ("memoryLimit", "memory_limit"):
            if value is None or (
                type(value) is int and (value == 0 or value >= MIN_PROBE_MEMORY_MIB)
            ):
                values["memory_limit"] = value
            else:
                problems.append(
                    f"`probe.memoryLimit`: expected MiB (at least {MIN_PROBE_MEMORY_MIB}), 0 for "
                    f"no limit or null for half the machine's memory, not {_describe(value)}; "
                    "using half the machine's memory"
                )
        else:
            if isinstance(value, int | float) and not isinstance(value, bool) and value >= 5:
                values["timeout"] = float(value)
            else:
                problems.append(
                    f"`probe.timeout`: expected a number of seconds (at least 5), not "
                    f"{_describe(value)}; using {defaults.timeout:g}"
                )
    return ProbeSettings(**values)
