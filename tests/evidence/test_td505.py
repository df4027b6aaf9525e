"""TD505: under the spawn and forkserver start methods each DataLoader worker re-imports the
main script; a loop over the loader at module level then tries to start workers from inside a
worker, which fails while the worker is still bootstrapping."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

BOOTSTRAP_ERROR = (
    "An attempt has been made to start a new process before the\n"
    "        current process has finished its bootstrapping phase."
)
SCRIPT = """
import sys
import torch
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.arange(8.0)), batch_size=4, num_workers=1,
                    multiprocessing_context=sys.argv[1])
{loop}
"""
UNGUARDED = """
for (x,) in loader:
    print("batch", x.sum().item(), flush=True)
"""
GUARDED = """
if __name__ == "__main__":
    for (x,) in loader:
        print("batch", x.sum().item(), flush=True)
"""


def _start(path: Path, context: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(path), context],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the workers go with it when it is stopped
    )


def _stderr_until(process: subprocess.Popen[str], marker: str, deadline: float) -> str:
    """Read stderr until `marker` shows up (the worker's traceback) or the script ends, then
    stop the script: the parent otherwise waits seconds before noticing the dead worker."""
    seen = ""
    assert process.stderr is not None
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        seen += line
        if marker in seen and "bootstrapping phase" in seen:
            break
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
    return seen


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_module_level_loop_fails_in_the_worker(tmp_path: Path, context: str) -> None:
    import multiprocessing

    if context not in multiprocessing.get_all_start_methods():
        pytest.skip(f"{context} is not available here")
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent(SCRIPT.format(loop=UNGUARDED)))
    stderr = _stderr_until(_start(script, context), "RuntimeError", time.monotonic() + 60)
    assert BOOTSTRAP_ERROR in stderr
    assert "for (x,) in loader:" in stderr  # raised while re-running the script's loop


def test_main_guard_makes_it_work(tmp_path: Path) -> None:
    script = tmp_path / "guarded.py"
    script.write_text(textwrap.dedent(SCRIPT.format(loop=GUARDED)))
    result = subprocess.run(
        [sys.executable, str(script), "spawn"], capture_output=True, text=True, timeout=90
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["batch 6.0", "batch 22.0"]
