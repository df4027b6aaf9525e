"""Version-dependent rules follow the torch installed in the user's interpreter when the
configuration names no target-torch, read from package metadata without importing torch."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import torch
from torchdoctor.torch_install import installed_torch_version, torch_version_in

# A bare torch.load: unsafe before torch 2.6 (it unpickles anything), safe since (weights_only).
BARE_LOAD = "import torch\n\nstate = torch.load('model.pt')\n"


def fake_torch(site: Path, version: str) -> None:
    dist_info = site / f"torch-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")


def make_old_torch_python(root: Path) -> str:
    """A real interpreter (a virtual environment) whose site-packages hold torch 2.4.1's
    metadata: what a user's older environment looks like to torchdoctor."""
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import site; print(site.getsitepackages()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    fake_torch(Path(site), "2.4.1+cu121")
    return str(python)


@pytest.fixture(scope="module")
def old_torch_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_old_torch_python(tmp_path_factory.mktemp("env"))


def check_json(*args: str, cwd: Path) -> list[dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "torchdoctor", "check", "--format", "json", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def test_the_version_comes_from_the_first_torch_on_the_path(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    fake_torch(first, "2.4.1+cu121")
    fake_torch(second, "2.13.0")
    assert torch_version_in([str(first), str(second)]) == (2, 4)
    assert torch_version_in([str(tmp_path / "missing")]) is None


def test_the_running_interpreter_reports_its_own_torch() -> None:
    major, minor = (int(part) for part in torch.__version__.split(".")[:2])
    assert installed_torch_version() == (major, minor)


def test_another_interpreter_is_asked_for_its_path(old_torch_python: str) -> None:
    assert installed_torch_version(old_torch_python) == (2, 4)
    assert installed_torch_version(str(Path(sys.executable).parent / "no-such-python")) is None


def test_check_follows_the_interpreters_torch(old_torch_python: str, tmp_path: Path) -> None:
    (tmp_path / "load.py").write_text(BARE_LOAD)
    old = check_json("--python", old_torch_python, "load.py", cwd=tmp_path)
    assert [finding["code"] for finding in old] == ["TD702"]
    assert "2.4" in str(old[0]["message"])
    assert check_json("load.py", cwd=tmp_path) == []  # this Python has torch 2.13


def test_target_torch_in_the_configuration_wins(old_torch_python: str, tmp_path: Path) -> None:
    (tmp_path / "load.py").write_text(BARE_LOAD)
    (tmp_path / "pyproject.toml").write_text('[tool.torchdoctor]\ntarget-torch = "2.13"\n')
    assert check_json("--python", old_torch_python, "load.py", cwd=tmp_path) == []
