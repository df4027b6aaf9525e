"""The shapes-by-line pass: every tensor a line of forward (or a function it calls) binds, with
its shape, dtype and grad flag, checked against a plain run of the same code written out by
hand here; a line in a loop keeps its first and last shapes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from torchdoctor.probe.schema import ProbeReport
from torchdoctor.probe.shape_schema import LineShapes

from .conftest import FIXTURES, WarmProbe, needs_torch, report_of

pytestmark = [needs_torch, pytest.mark.timeout(120)]

MODELS = FIXTURES / "line_shapes_models.py"
SOURCE = MODELS.read_text(encoding="utf-8").splitlines()


def line_of(code: str, occurrence: int = 0) -> int:
    """1-based line of the `occurrence`-th line whose stripped text starts with `code`."""
    found = [n for n, text in enumerate(SOURCE, start=1) if text.strip().startswith(code)]
    return found[occurrence]


def load_models() -> Any:
    spec = importlib.util.spec_from_file_location("line_shapes_models_by_hand", MODELS)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def recorded(report: ProbeReport) -> dict[int, LineShapes]:
    assert report.line_shapes is not None
    assert report.line_shapes.method == (
        "sys.monitoring" if sys.version_info >= (3, 12) else "sys.settrace"
    )
    assert not report.line_shapes.truncated
    return {
        row.line: row
        for row in report.line_shapes.lines
        if Path(row.file).resolve() == MODELS.resolve()
    }


def first_shapes(row: LineShapes) -> dict[str, list[list[int]]]:
    return {local.name: [t.shape for t in local.first.tensors] for local in row.names}


@pytest.fixture(scope="module")
def reports(warm: WarmProbe) -> dict[str, ProbeReport]:
    names = ("CausalSelfAttention", "SmallCNN")
    return {name: report_of(warm.probe(MODELS, name)) for name in names}


def test_attention_block_and_its_helper_match_a_plain_run(reports: dict[str, ProbeReport]) -> None:
    import torch

    report = reports["CausalSelfAttention"]
    rows = recorded(report)
    model = load_models().CausalSelfAttention()
    x = torch.randn(report.input.tensors[0].shape)

    # forward, written out line by line
    expected: dict[int, dict[str, torch.Tensor]] = {line_of("def forward(self, x"): {"x": x}}
    B, T, C = x.size()
    q, k, v = model.c_attn(x).split(model.n_embd, dim=2)
    expected[line_of("q, k, v =")] = {"q": q, "k": k, "v": v}
    k = k.view(B, T, model.n_head, C // model.n_head).transpose(1, 2)
    expected[line_of("k = k.view")] = {"k": k}
    q = q.view(B, T, model.n_head, C // model.n_head).transpose(1, 2)
    expected[line_of("q = q.view")] = {"q": q}
    v = v.view(B, T, model.n_head, C // model.n_head).transpose(1, 2)
    expected[line_of("v = v.view")] = {"v": v}
    # the helper scaled_scores(q, k), written out too
    expected[line_of("def scaled_scores")] = {"q": q, "k": k}
    scores = (q @ k.transpose(-2, -1)) * (1.0 / k.size(-1) ** 0.5)
    expected[line_of("scores = (q @ k")] = {"scores": scores}
    expected[line_of("return scores")] = {"return": scores}
    att = scores
    expected[line_of("att = scaled_scores")] = {"att": att}
    att = att.masked_fill(model.bias[:, :, :T, :T] == 0, float("-inf"))
    expected[line_of("att = att.masked_fill")] = {"att": att}
    att = torch.softmax(att, dim=-1)
    expected[line_of("att = F.softmax")] = {"att": att}
    y = att @ v
    expected[line_of("y = att @ v")] = {"y": y}
    y = y.transpose(1, 2).contiguous().view(B, T, C)
    expected[line_of("y = y.transpose")] = {"y": y}
    expected[line_of("return self.c_proj(y)")] = {"return": model.c_proj(y)}

    for line, tensors in expected.items():
        row = rows[line]
        assert row.hits == 1, SOURCE[line - 1]
        assert first_shapes(row) == {name: [list(t.shape)] for name, t in tensors.items()}, (
            SOURCE[line - 1]
        )
        for local in row.names:
            facts = local.first.tensors[0]
            tensor = tensors[local.name]
            assert facts.dtype == str(tensor.dtype).removeprefix("torch.")
            assert facts.requires_grad == tensor.requires_grad
            assert facts.device == "cpu"
            assert facts.bytes == tensor.numel() * tensor.element_size()
            assert not local.varies
    # `B, T, C = x.size()` binds ints, the scale a float: nothing to show there
    assert rows[line_of("B, T, C = x.size()")].names == []
    assert rows[line_of("scale = 1.0")].names == []


def test_cnn_loop_keeps_first_and_last_shapes(reports: dict[str, ProbeReport]) -> None:
    import torch

    report = reports["SmallCNN"]
    rows = recorded(report)
    model = load_models().SmallCNN()
    images = torch.randn(report.input.tensors[0].shape)

    x = images
    block_inputs, block_outputs = [], []
    for block in model.blocks:
        block_inputs.append(x)
        x = block(x)
        block_outputs.append(x)
    flat = torch.flatten(x, 1)
    logits = model.head(flat)

    loop = rows[line_of("x = block(x)")]
    assert loop.hits == len(model.blocks) == 2
    (local,) = loop.names
    assert local.name == "x" and local.varies and local.runs == 2
    assert local.first.tensors[0].shape == list(block_outputs[0].shape)
    assert local.last.tensors[0].shape == list(block_outputs[-1].shape)
    assert rows[line_of("for block in self.blocks")].hits == 3  # two runs and the exit test

    assert first_shapes(rows[line_of("flat = torch.flatten")]) == {"flat": [list(flat.shape)]}
    assert first_shapes(rows[line_of("logits = self.head")]) == {"logits": [list(logits.shape)]}

    # the submodule class's forward ran once per block: first and last of each of its lines
    y_first = torch.relu(model.blocks[0].conv(block_inputs[0]))
    y_last = torch.relu(model.blocks[1].conv(block_inputs[1]))
    conv_line = rows[line_of("y = torch.relu(self.conv(x))")]
    assert conv_line.hits == 2 and conv_line.function == "forward"
    (y,) = conv_line.names
    assert (y.first.tensors[0].shape, y.last.tensors[0].shape) == (
        list(y_first.shape), list(y_last.shape)
    )
    returned = next(n for n in rows[line_of("return pooled")].names if n.name == "return")
    assert returned.last.tensors[0].shape == list(block_outputs[-1].shape)


def test_library_code_is_never_traced(reports: dict[str, ProbeReport]) -> None:
    for report in reports.values():
        assert report.line_shapes is not None
        files = {Path(row.file).resolve() for row in report.line_shapes.lines}
        assert files == {MODELS.resolve()}


def test_the_cost_bench_runs_and_prints_its_table() -> None:
    import subprocess

    bench = Path(__file__).parents[2] / "bench" / "line_shapes_bench.py"
    done = subprocess.run(
        [sys.executable, str(bench), "--quick"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "| attention, test size |" in done.stdout and "| CNN, test size |" in done.stdout
