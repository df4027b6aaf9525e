"""The Pythons the language server starts (the torch-version look-up, jedi's inspection process)
and the extension's launch script run no code from the user's folder, PYTHONPATH, the
PYTHONSTARTUP file or the user site, even when the server's working folder is the workspace."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from torchdoctor import torch_install
from torchdoctor.lsp.jedi_support import JediSupport

from .booby_trap import BoobyTrap, fake_torch_metadata, make_booby_trap, plain_python

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_SCRIPT = ROOT / "vscode-extension" / "python" / "start_server.py"


@pytest.fixture
def trap(tmp_path: Path) -> BoobyTrap:
    return make_booby_trap(tmp_path)


@pytest.fixture
def inside_the_trap(trap: BoobyTrap, monkeypatch: pytest.MonkeyPatch) -> BoobyTrap:
    """This process (the server, in these tests) in the workspace, with its environment."""
    for name, value in trap.environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(trap.workspace)
    return trap


def test_the_booby_traps_fire_in_a_python_started_carelessly(trap: BoobyTrap) -> None:
    """The traps are live: otherwise the tests below would prove nothing."""
    subprocess.run(
        [plain_python(), "-c", "import pathspec, torchdoctor"],
        cwd=trap.workspace,
        env=trap.environment(),
        check=False,
        capture_output=True,
    )
    assert trap.fired() == ["sitecustomize", "usercustomize", "pathspec", "torchdoctor"]
    trap.marker.unlink()
    user_site_only = {**trap.environment(), "PYTHONPATH": ""}
    subprocess.run([plain_python(), "-c", "pass"], env=user_site_only, check=True)
    assert trap.fired() == ["user-site-usercustomize"]


def test_the_torch_version_look_up_runs_nothing_from_the_workspace(
    inside_the_trap: BoobyTrap,
) -> None:
    # a torch in the user site only: `pip install --user torch`
    fake_torch_metadata(inside_the_trap.user_site, "2.4.1")
    torch_install._version_of_interpreter.cache_clear()
    try:
        # what the server does (it runs with -I -S, so it always asks the interpreter)
        version = torch_install._version_of_interpreter(plain_python())
    finally:
        torch_install._version_of_interpreter.cache_clear()
    assert version == (2, 4)  # the user site was read for metadata…
    assert inside_the_trap.fired() == []  # …and nothing in it, or in the workspace, ran


def test_a_bare_interpreter_name_is_never_taken_from_the_working_folder(
    inside_the_trap: BoobyTrap,
) -> None:
    fake = inside_the_trap.workspace / "python-in-workspace"
    fake.write_text(f"#!/bin/sh\necho ran > {inside_the_trap.marker}\n")
    fake.chmod(0o755)
    torch_install._version_of_interpreter.cache_clear()
    try:
        assert torch_install.installed_torch_version("python-in-workspace") is None
    finally:
        torch_install._version_of_interpreter.cache_clear()
    assert inside_the_trap.fired() == []


@pytest.mark.timeout(120)
def test_jedi_inspects_the_interpreter_without_running_workspace_code(
    inside_the_trap: BoobyTrap,
) -> None:
    jedi = JediSupport()
    try:
        warm_up = jedi.start(plain_python(), str(inside_the_trap.workspace))
        assert warm_up is not None
        done = warm_up.result(timeout=100)
    finally:
        jedi.shutdown()
    # jedi's process ran in that interpreter and looked for torch…
    assert Path(done.interpreter).resolve() == Path(plain_python()).resolve()
    # …with no PYTHONPATH (sitecustomize), user site or workspace module run
    assert inside_the_trap.fired() == []


def test_the_launch_script_refuses_a_start_that_is_not_isolated(trap: BoobyTrap) -> None:
    done = subprocess.run(
        [sys.executable, str(LAUNCH_SCRIPT), "--help"],
        cwd=trap.workspace,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "python -I -S" in done.stderr
    assert "usage: torchdoctor serve" not in done.stdout


def test_the_launch_script_starts_the_server_from_a_source_folder(trap: BoobyTrap) -> None:
    """--path puts a checkout first; -I -S keep PYTHONPATH, the workspace and the user site out."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(LAUNCH_SCRIPT), "--path", str(ROOT / "server"), "--help"],
        cwd=trap.workspace,
        env=trap.environment(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "usage: torchdoctor serve" in done.stdout
    assert trap.fired() == []
