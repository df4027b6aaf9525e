"""Finding and reading `[tool.torchdoctor]`: each pyproject.toml parsed once on the way up, and a
file that does not parse is an error that says where, never a quiet fall-back to the defaults."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from torchdoctor.analysis import Config, ConfigError, Severity, load_config
from torchdoctor.analysis import config as config_module
from torchdoctor.analysis.config import with_overrides

UNCLOSED_TABLE = '[project]\nname = "demo"\n\n[tool.torchdoctor\nselect = ["TD1"]\n'


def project(folder: Path, pyproject: str) -> Path:
    """A project folder with `pyproject` and one source file below it; the file's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(pyproject)
    source = folder / "src" / "train.py"
    source.parent.mkdir()
    source.write_text("import torch\n")
    return source


def test_an_unclosed_table_header_names_file_line_and_column(tmp_path: Path) -> None:
    source = project(tmp_path, UNCLOSED_TABLE)

    with pytest.raises(ConfigError) as raised:
        load_config(source)

    error = raised.value
    assert (error.path, error.line, error.column) == (tmp_path / "pyproject.toml", 4, 18)
    assert str(error).startswith(f"{tmp_path / 'pyproject.toml'}:4:18: not valid TOML: ")
    assert "Expected ']'" in error.reason


def test_check_stops_with_exit_2_on_a_pyproject_that_does_not_parse(tmp_path: Path) -> None:
    source = project(tmp_path, UNCLOSED_TABLE)
    done = subprocess.run(
        [sys.executable, "-m", "torchdoctor", "check", str(source)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"{tmp_path / 'pyproject.toml'}:4:18: not valid TOML" in done.stderr
    assert done.stdout == ""  # nothing was checked under the defaults


def test_a_broken_pyproject_of_another_tool_is_passed_over(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.torchdoctor]\nignore = ["TD104"]\n')
    source = project(tmp_path / "inner", "[tool.black\nline-length = 99\n")
    assert load_config(source).ignore == ("TD104",)


def test_each_pyproject_on_the_way_up_is_parsed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.torchdoctor]\nignore = ["TD104"]\n')
    source = project(tmp_path / "inner", "[tool.black]\nline-length = 99\n")
    parsed: list[str] = []
    real_loads = config_module.tomllib.loads

    def counting_loads(text: str) -> dict[str, object]:
        parsed.append(text)
        return real_loads(text)

    monkeypatch.setattr(config_module.tomllib, "loads", counting_loads)
    assert load_config(source).ignore == ("TD104",)
    assert len(parsed) == 2  # the inner file (no table) and the outer one, once each


def test_bad_entries_are_listed_when_not_strict(tmp_path: Path) -> None:
    source = project(tmp_path, '[tool.torchdoctor]\nignore = ["TD104"]\nselekt = ["TD1"]\n')
    with pytest.raises(ConfigError, match="selekt"):
        load_config(source)
    lenient = load_config(source, strict=False)
    assert lenient.ignore == ("TD104",)
    assert any("selekt" in warning for warning in lenient.warnings)


def test_overrides_select_replaces_ignore_adds_severity_wins_per_code() -> None:
    file_config = Config(
        select=("TD1",),
        ignore=("TD104",),
        severity=(("TD101", Severity.ERROR), ("TD1", Severity.HINT)),
    )
    merged = with_overrides(
        file_config,
        select=["TD2"],
        ignore=["TD201"],
        severity=[("TD101", Severity.INFORMATION)],
    )
    assert merged.select == ("TD2",)
    assert merged.ignore == ("TD104", "TD201")
    assert merged.severity_for("TD101", Severity.WARNING) is Severity.INFORMATION
    assert merged.severity_for("TD102", Severity.WARNING) is Severity.HINT
    assert with_overrides(file_config) == file_config
