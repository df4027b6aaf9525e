"""Both tracing back ends of the shapes-by-line pass record the same lines: `sys.monitoring`
(Python 3.12+) and `sys.settrace` (3.10-3.11). The interpreters found for 3.12+ here have no
torch, so this runs the tracer on a plain class carrying what it reads from a tensor (shape,
dtype, device, requires_grad); test_line_shapes.py checks the pass on real torch."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TRACER = Path(__file__).parents[2] / "server" / "torchdoctor" / "probe" / "line_shapes.py"

BOXES = '''class Dtype:
    itemsize = 4

    def __str__(self):
        return "float32"


class Box:
    def __init__(self, *shape):
        self.shape, self.dtype, self.device, self.requires_grad = shape, Dtype(), "cpu", False

    def grow(self):
        return Box(self.shape[0] * 2, *self.shape[1:])
'''

USER_CODE = '''from boxes import Box


def helper(b):
    bigger = b.grow()
    return bigger


def forward(x):
    y = helper(x)
    pair = (y, x)
    for _ in range(3):
        y = y.grow()
    return y
'''

DRIVER = '''import importlib.util, json, sys
sys.path.insert(0, sys.argv[2])
spec = importlib.util.spec_from_file_location("line_shapes", sys.argv[1])
tracer = importlib.util.module_from_spec(spec)
sys.modules["line_shapes"] = tracer
spec.loader.exec_module(tracer)
import boxes, user_code
user_file = user_code.__file__
passes = [
    tracer.line_shapes_pass(
        lambda: user_code.forward(boxes.Box(2, 3)),
        lambda code: code.co_filename == user_file,
        boxes.Box,
        lambda file, line: "",
    )
    for _ in range(2)  # the second pass finds the first one's tool id and disabled code freed
]
tools = [sys.monitoring.get_tool(i) for i in range(6)] if sys.version_info >= (3, 12) else []
print(json.dumps({"passes": passes, "tools": tools}))
'''


def interpreters_with_monitoring() -> list[str]:
    """Python 3.12+ executables on PATH or under pyenv (not this one when it is older)."""
    # pyenv's shims answer only for the versions a project selects: use its versions instead
    found = [shutil.which(f"python3.{minor}") for minor in range(12, 16)]
    found = [path for path in found if path and f"{os.sep}shims{os.sep}" not in path]
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found += sorted(glob.glob(os.path.join(root, "versions", "3.1[2-9]*", "bin", "python3")))
    if sys.version_info >= (3, 12):
        found.append(sys.executable)
    by_target = {os.path.realpath(path): path for path in found if path}
    return sorted(by_target.values())


def trace_with(python: str, folder: Path) -> dict:
    done = subprocess.run(
        [python, str(folder / "driver.py"), str(TRACER), str(folder)],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def comparable(info: dict) -> list:
    return [
        (row["line"], row["function"], row["hits"], row["names"]) for row in info["lines"]
    ]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "boxes.py").write_text(BOXES)
    (tmp_path / "user_code.py").write_text(USER_CODE)
    (tmp_path / "driver.py").write_text(DRIVER)
    return tmp_path


def test_settrace_records_the_helper_the_loop_and_the_returns(folder: Path) -> None:
    if sys.version_info >= (3, 12):
        pytest.skip("this interpreter traces with sys.monitoring; settrace is for 3.10-3.11")
    result = trace_with(sys.executable, folder)
    first, second = result["passes"]
    assert first["method"] == "sys.settrace"
    rows = {row["line"]: row for row in first["lines"]}
    lines = USER_CODE.splitlines()
    loop = rows[lines.index("        y = y.grow()") + 1]
    (y,) = loop["names"]
    assert loop["hits"] == 3 and y["varies"]
    shapes = (y["first"]["tensors"][0]["shape"], y["last"]["tensors"][0]["shape"])
    assert shapes == ([8, 3], [32, 3])
    assert comparable(second) == comparable(first)


@pytest.mark.skipif(
    not interpreters_with_monitoring(), reason="no Python 3.12+ interpreter on this machine"
)
@pytest.mark.parametrize("python", interpreters_with_monitoring())
def test_monitoring_records_what_settrace_records(python: str, folder: Path) -> None:
    result = trace_with(python, folder)
    first, second = result["passes"]
    assert first["method"] == "sys.monitoring"
    assert "torchdoctor line shapes" not in result["tools"]  # the tool id was given back
    assert comparable(second) == comparable(first)  # disabled code objects were re-armed
    if sys.version_info < (3, 12):
        reference = trace_with(sys.executable, folder)["passes"][0]
        assert comparable(first) == comparable(reference)
    else:
        assert [row["hits"] for row in first["lines"]] == [1, 1, 1, 1, 1, 1, 4, 3, 1]
