"""The tracer of the shapes-by-line pass on its own, in this process with real torch: containers
of tensors, the caps, an exception inside traced code, and that the tracer leaves nothing set."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from .conftest import needs_torch

pytestmark = [needs_torch]

TRACER = Path(__file__).parents[2] / "server" / "torchdoctor" / "probe" / "line_shapes.py"

USER_CODE = '''import torch


def pair(x):
    doubled = x * 2
    halves = (x[:1], x[1:])
    named = {"first": x[0], "count": 3}
    return doubled, halves, named


def loop(x, steps):
    total = x
    for _ in range(steps):
        total = torch.cat([total, x])
    return total


def fails(x):
    y = x + 1
    raise ValueError("from user code")
'''


def load(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def traced(tmp_path: Path) -> tuple[Any, Any, str]:
    path = tmp_path / "user_code.py"
    path.write_text(USER_CODE, encoding="utf-8")
    return load(TRACER, "_test_line_shapes"), load(path, "_test_user_code"), str(path)


def run(tracer: Any, call: Any, file: str, **limits: int) -> dict[str, Any]:
    import torch

    return tracer.line_shapes_pass(
        call,
        lambda code: code.co_filename == file,
        torch.Tensor,
        lambda f, n: USER_CODE.splitlines()[n - 1].strip(),
        tracer.Limits(**limits) if limits else None,
    )


def by_code(info: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["code"]: row for row in info["lines"]}


def test_tuples_and_dicts_of_tensors_are_recorded_with_their_kind(traced: Any) -> None:
    import torch

    tracer, user, file = traced
    x = torch.zeros(4, 3)
    rows = by_code(run(tracer, lambda: user.pair(x), file))
    (halves,) = rows["halves = (x[:1], x[1:])"]["names"]
    assert halves["first"]["kind"] == "tuple" and halves["first"]["count"] == 2
    assert [t["shape"] for t in halves["first"]["tensors"]] == [[1, 3], [3, 3]]
    (named,) = rows['named = {"first": x[0], "count": 3}']["names"]
    assert named["first"]["kind"] == "dict" and named["first"]["keys"] == ["first"]
    assert named["first"]["tensors"][0]["shape"] == [3]
    returned = rows["return doubled, halves, named"]["names"]
    assert [n["name"] for n in returned] == ["return"]
    assert returned[0]["first"]["kind"] == "tuple"  # the dict inside is not looked into


def test_a_loop_line_keeps_first_and_last_and_the_caps_hold(traced: Any) -> None:
    import torch

    tracer, user, file = traced
    x = torch.ones(2, 5)
    info = run(tracer, lambda: user.loop(x, 4), file)
    (total,) = by_code(info)["total = torch.cat([total, x])"]["names"]
    assert total["first"]["tensors"][0]["shape"] == [4, 5]
    assert total["last"]["tensors"][0]["shape"] == [10, 5]
    assert total["varies"] and total["runs"] == 4 and not info["truncated"]

    capped = run(tracer, lambda: user.loop(x, 50), file, max_line_events=10)
    assert capped["truncated"] and capped["line_events"] == 10

    few_lines = run(tracer, lambda: user.loop(x, 3), file, max_lines=2)
    assert few_lines["truncated"] and len(few_lines["lines"]) == 2


def test_an_exception_in_user_code_propagates_and_the_tracer_is_removed(traced: Any) -> None:
    import torch

    tracer, user, file = traced
    before = sys.gettrace()
    with pytest.raises(ValueError, match="from user code"):
        run(tracer, lambda: user.fails(torch.zeros(2)), file)
    assert sys.gettrace() is before
    if sys.version_info >= (3, 12):
        names = [sys.monitoring.get_tool(i) for i in range(6)]
        assert "torchdoctor line shapes" not in names
