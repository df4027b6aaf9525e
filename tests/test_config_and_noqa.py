"""[tool.torchdoctor] configuration and `# noqa` suppressions, as a user writes them."""

from __future__ import annotations

from pathlib import Path

import pytest
from torchdoctor.analysis import Config, ConfigError, Severity, check, load_config
from torchdoctor.analysis.noqa import noqa_edit_text

LOOP = """\
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward(){comment}
    optimizer.step()
"""


def test_noqa_with_the_code_suppresses_it() -> None:
    assert check(LOOP.format(comment="  # noqa: TD101")) == []


def test_noqa_with_several_codes_and_bare_noqa() -> None:
    assert check(LOOP.format(comment="  # noqa: E501, TD101")) == []
    assert check(LOOP.format(comment="  # noqa")) == []


def test_noqa_for_another_code_does_not_suppress() -> None:
    assert [f.code for f in check(LOOP.format(comment="  # noqa: TD102"))] == ["TD101"]


def test_noqa_inside_a_string_is_not_a_comment() -> None:
    text = LOOP.format(comment="; print('# noqa: TD101')")
    assert [f.code for f in check(text)] == ["TD101"]


def test_ignore_on_line_edit_text() -> None:
    assert noqa_edit_text("    loss.backward()", "TD101") == "    loss.backward()  # noqa: TD101"
    assert noqa_edit_text("x  # noqa: TD104", "TD101") == "x  # noqa: TD104, TD101"
    assert noqa_edit_text("x  # noqa", "TD101") == "x  # noqa"


def _project(tmp_path: Path, table: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "pyproject.toml").write_text(f"[tool.torchdoctor]\n{table}\n")
    source = tmp_path / "src" / "train.py"
    source.parent.mkdir()
    source.write_text(LOOP.format(comment=""))
    return source


def test_select_ignore_severity_and_per_file_ignores(tmp_path: Path) -> None:
    source = _project(
        tmp_path,
        'ignore = ["TD102"]\ntarget-torch = "2.4"\n[tool.torchdoctor.severity]\nTD101 = "error"\n'
        '[tool.torchdoctor.per-file-ignores]\n"scripts/*.py" = ["TD1"]\n',
    )
    config = load_config(source)
    assert config.torch_version == (2, 4)
    findings = check(source.read_text(), str(source), config)
    assert [(f.code, f.severity) for f in findings] == [("TD101", Severity.ERROR)]
    script = tmp_path / "scripts" / "run.py"
    assert check(source.read_text(), str(script), config) == []


def test_unknown_keys_give_a_clear_message(tmp_path: Path) -> None:
    source = _project(tmp_path, 'selekt = ["TD1"]')
    with pytest.raises(ConfigError, match="unknown key `selekt`.*known keys"):
        load_config(source)


def test_bad_values_name_the_key(tmp_path: Path) -> None:
    source = _project(tmp_path, 'select = ["XY1"]')
    with pytest.raises(ConfigError, match="`select`.*XY1.*matches no rule"):
        load_config(source)
    source2 = _project(tmp_path / "b", "[tool.torchdoctor.severity]\nTD101 = 'loud'")
    with pytest.raises(ConfigError, match="severity of TD101"):
        load_config(source2)


def test_select_all_turns_on_rules_that_are_off_by_default() -> None:
    from torchdoctor.analysis import REGISTRY

    off = {info.code for info in REGISTRY if not info.enabled_by_default}
    assert off <= Config(select=("ALL",)).enabled_codes()
    assert not off & Config().enabled_codes()
