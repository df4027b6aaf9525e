"""The server's settings agree with the extension's package.json, the one definition of them
(what VS Code shows): the same names, the same defaults, the same enums and bounds, and so does
the settings table of docs/editors.md. A setting added to package.json and not to
`lsp/settings.py` (or the other way round) fails here."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from torchdoctor.analysis import Severity
from torchdoctor.lsp.settings import (
    DEVICES,
    IGNORED_KEYS,
    LOCALES,
    SHAPE_HINT_SCOPES,
    Settings,
    parse_settings,
)

from ..conftest import ROOT

PROPERTIES: dict[str, dict[str, Any]] = json.loads(
    (ROOT / "vscode-extension" / "package.json").read_text(encoding="utf-8")
)["contributes"]["configuration"]["properties"]
SERVER_KEYS = {
    key.removeprefix("torchdoctor."): spec
    for key, spec in PROPERTIES.items()
    if key.removeprefix("torchdoctor.").split(".")[0] not in IGNORED_KEYS
}


def nested(key: str, value: Any) -> dict[str, Any]:
    """`probe.iters` = 5 as the client sends it: {"probe": {"iters": 5}}."""
    head, _, tail = key.partition(".")
    return {head: {tail: value}} if tail else {head: value}


def test_package_json_defaults_parse_to_the_servers_defaults() -> None:
    sent: dict[str, Any] = {"probe": {}}
    for key, spec in SERVER_KEYS.items():
        head, _, tail = key.partition(".")
        if tail:
            sent[head][tail] = spec["default"]
        elif key != "interpreter":  # "" there; the client sends the interpreter it resolved
            sent[key] = spec["default"]
    parsed = parse_settings(sent)
    assert parsed.problems == ()  # every name package.json has is one the server knows
    assert parsed.settings == Settings()


def test_every_server_setting_is_in_package_json() -> None:
    """The other direction: a field of Settings that package.json lacks is unreachable."""
    camel = {
        "code_lens": "codeLens",
        "inlay_hints": "inlayHints",
        "shape_hints": "shapeHints",
        "hover_signatures": "hoverSignatures",
        "max_document_size": "maxDocumentSize",
        "memory_limit": "memoryLimit",
    }
    defaults = Settings()
    names = {camel.get(name, name) for name in vars(defaults) if name != "probe"}
    names |= {f"probe.{camel.get(name, name)}" for name in vars(defaults.probe)}
    assert names == set(SERVER_KEYS)


def test_the_enums_are_package_jsons() -> None:
    assert tuple(PROPERTIES["torchdoctor.locale"]["enum"]) == LOCALES
    assert tuple(PROPERTIES["torchdoctor.probe.device"]["enum"]) == DEVICES
    assert tuple(PROPERTIES["torchdoctor.shapeHints"]["enum"]) == SHAPE_HINT_SCOPES
    levels = PROPERTIES["torchdoctor.severity"]["additionalProperties"]["enum"]
    assert levels == [level.value for level in Severity]


@pytest.mark.parametrize("key", sorted(k for k, s in SERVER_KEYS.items() if "enum" in s))
def test_each_enum_value_is_accepted_and_nothing_else(key: str) -> None:
    for value in PROPERTIES[f"torchdoctor.{key}"]["enum"]:
        assert parse_settings(nested(key, value)).problems == (), value
    assert parse_settings(nested(key, "nonsense")).problems != ()


@pytest.mark.parametrize(
    "key", sorted(k for k, s in SERVER_KEYS.items() if "minimum" in s or "maximum" in s)
)
def test_numeric_bounds_are_package_jsons(key: str) -> None:
    spec = PROPERTIES[f"torchdoctor.{key}"]
    if "minimum" in spec:
        assert parse_settings(nested(key, spec["minimum"])).problems == ()
        assert parse_settings(nested(key, spec["minimum"] - 1)).problems != ()
    if "maximum" in spec:
        assert parse_settings(nested(key, spec["maximum"])).problems == ()
        assert parse_settings(nested(key, spec["maximum"] + 1)).problems != ()


@pytest.mark.parametrize("key", sorted(k for k, s in SERVER_KEYS.items() if s["type"] == "boolean"))
def test_booleans_take_true_and_false_only(key: str) -> None:
    assert parse_settings(nested(key, False)).problems == ()
    assert parse_settings(nested(key, "yes")).problems != ()


def test_the_settings_table_of_the_editor_guide_is_package_jsons() -> None:
    """docs/editors.md lists the settings for other LSP clients: the same names and defaults."""
    guide = (ROOT / "docs" / "editors.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([\w.]+)` \| `([^`]*)` \|", guide, re.MULTILINE)
    assert {key: json.loads(default) for key, default in rows} == {
        key: spec["default"] for key, spec in SERVER_KEYS.items()
    }
