"""Neovim's built-in LSP client, headless, on an example file: a client with its own reading
of the protocol."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from torchdoctor.analysis import check

from .conftest import ROOT, SERVER_COMMAND, example_files

INIT = Path(__file__).parent / "nvim" / "init.lua"


def _file_with_td101() -> Path:
    for path in example_files():
        if any(f.code == "TD101" for f in check(path.read_text("utf-8"), str(path))):
            return path
    raise AssertionError("no example file has a TD101 finding")


@pytest.mark.skipif(
    shutil.which("nvim") is None,
    reason="Neovim is not installed (Debian/Ubuntu: apt-get install -y neovim)",
)
@pytest.mark.timeout(90)
def test_neovim_shows_torchdoctor_diagnostics(tmp_path):
    path = _file_with_td101()
    out = tmp_path / "diagnostics.json"
    env = {
        "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
        "HOME": str(tmp_path),  # no user config, no shada or swap files of the user's
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "TORCHDOCTOR_CMD": json.dumps(SERVER_COMMAND),
        "TORCHDOCTOR_OUT": str(out),
        "TORCHDOCTOR_TIMEOUT_MS": "60000",
    }
    done = subprocess.run(
        ["nvim", "--headless", "-n", "-u", str(INIT), str(path)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        timeout=80,
        check=False,
    )
    assert out.exists(), f"Neovim wrote nothing: {done.stderr.decode(errors='replace')}"
    result = json.loads(out.read_text())
    assert result["attached"], result
    seen = {(d["code"], d["lnum"]) for d in result["diagnostics"]}
    assert any(code == "TD101" for code, _ in seen)
    expected = {(f.code, f.span.start_line) for f in check(path.read_text("utf-8"), str(path))}
    assert seen == expected
    assert {d["source"] for d in result["diagnostics"]} == {"torchdoctor"}
