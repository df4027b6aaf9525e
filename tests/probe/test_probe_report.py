"""Real probes of real models: the report's numbers equal what torch itself says."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from torchdoctor.probe.schema import ProbeReport

from .conftest import (
    EXAMPLES,
    FIXTURES,
    WarmProbe,
    error_of,
    marked_line,
    needs_torch,
    plain_flop_counter,
    report_of,
)

pytestmark = [needs_torch, pytest.mark.timeout(120)]

MODELS = EXAMPLES / "models.py"


def load_examples() -> Any:
    spec = importlib.util.spec_from_file_location("probe_test_examples", MODELS)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def example_input(report: ProbeReport) -> Any:
    import torch

    (tensor,) = report.input.tensors
    if tensor.dtype == "int64":
        return torch.randint(0, 100, tensor.shape)
    return torch.randn(tensor.shape)


@pytest.fixture(scope="module")
def example_reports(warm: WarmProbe) -> dict[str, ProbeReport]:
    return {
        name: report_of(warm.probe(MODELS, name))
        for name in ("SmallCNN", "TinyTransformer", "LSTMTagger")
    }


@pytest.mark.parametrize("name", ["SmallCNN", "TinyTransformer", "LSTMTagger"])
def test_params_flops_and_shapes_match_torch(
    example_reports: dict[str, ProbeReport], name: str
) -> None:
    import torch

    report = example_reports[name]
    model = getattr(load_examples(), name)()
    params = list(model.parameters())
    assert report.params.total == sum(p.numel() for p in params)
    assert report.params.trainable == sum(p.numel() for p in params if p.requires_grad)
    assert report.params.parameter_bytes == sum(p.numel() * p.element_size() for p in params)

    x = example_input(report)
    shapes: dict[str, list[list[int]]] = {}

    def remember(name: str) -> Any:
        def hook(_module: Any, _args: Any, output: Any) -> None:
            flat = output if isinstance(output, tuple) else (output,)
            found: list[list[int]] = []
            for item in flat:
                items = item if isinstance(item, tuple) else (item,)
                found += [list(t.shape) for t in items if isinstance(t, torch.Tensor)]
            shapes[name] = found

        return hook

    for module_name, module in model.named_modules():
        module.register_forward_hook(remember(module_name))
    with plain_flop_counter() as counter:
        output = model(x)
        forward_flops = counter.get_total_flops()
        output.sum().backward()
    assert report.flops.forward == forward_flops
    assert report.flops.forward_backward == counter.get_total_flops()
    assert report.flops.forward > 0
    reported = {row.name: row.output_shapes for row in report.modules if row.calls}
    assert reported == shapes


def test_input_inferred_from_the_first_layer_used(
    example_reports: dict[str, ProbeReport],
) -> None:
    cnn = example_reports["SmallCNN"].input
    # 224x224 fails the Linear after the flatten on the meta device; 32x32 fits.
    assert (cnn.source, cnn.spec) == ("inferred", "(8, 3, 32, 32)")
    assert "Conv2d(in_channels=3)" in cnn.detail and "meta" in cnn.detail
    lstm = example_reports["LSTMTagger"].input
    # token ids below the vocabulary of that first Embedding
    assert (lstm.source, lstm.spec) == ("inferred", "(8, 16):int64[0,500)")
    transformer = example_reports["TinyTransformer"].input
    assert transformer.source == "comment" and transformer.spec == "(8, 32):int64"
    assert transformer.detail == f"from the comment on line {marked_line(MODELS, 'torchdoctor')}"


def test_report_has_measurements_lines_and_declarations(
    example_reports: dict[str, ProbeReport],
) -> None:
    report = example_reports["SmallCNN"]
    latency = report.latency
    assert latency.method == "perf_counter" and latency.forward_backward is not None
    assert 0 < latency.forward.min_ms <= latency.forward.median_ms <= latency.forward.max_ms
    assert latency.forward_backward.iterations >= 2
    memory = report.memory
    assert memory.method == "profiler_allocations"
    assert memory.peak_bytes == memory.baseline_bytes + memory.activation_bytes
    assert memory.activation_bytes > 8 * 16 * 32 * 32 * 4  # at least the first conv's output
    assert report.device.kind == "cpu" and report.device.threads == 1
    assert report.top_ops and all(op.self_ms >= 0 for op in report.top_ops)

    source = MODELS.read_text().splitlines()
    conv = report.module("features.0")
    assert conv is not None and conv.file == str(MODELS)
    assert "nn.Conv2d(3, 16" in source[conv.line - 1]
    classifier = report.module("classifier")
    assert classifier is not None and "self.classifier = " in source[classifier.line - 1]

    lines = {row.line: row for row in report.lines}
    features_line = next(i for i, text in enumerate(source, 1) if "self.features(images)" in text)
    assert lines[features_line].output_shape == [8, 32, 8, 8]
    assert lines[features_line].backward_ms > 0
    assert 0.5 < lines[features_line].share <= 1.0  # the convolutions are most of the step

    recommendation = report.recommendation
    assert recommendation.strategy == "ddp" and recommendation.device_memory_bytes is None
    assert recommendation.model_state_bytes == 16 * report.params.trainable + 400  # + BN buffers
    assert not report.findings


def test_report_round_trips_through_json_and_the_schema(
    example_reports: dict[str, ProbeReport],
) -> None:
    for report in example_reports.values():
        data = json.loads(json.dumps(report.to_dict()))
        assert ProbeReport.from_dict(data, strict=True).to_dict() == data
        assert data["schema"] == 1


def test_each_pitfall_is_reported_at_its_line(warm: WarmProbe) -> None:
    path = FIXTURES / "pitfalls.py"
    report = report_of(warm.probe(path, "Pitfalls"))
    found = {(f.kind, f.line) for f in report.findings}
    expected = {
        (kind, marked_line(path, f"expect: {kind}"))
        for kind in ("float64", "non_contiguous_view", "nan", "unused_parameter")
    }
    assert found == expected
    assert all(f.file == str(path) for f in report.findings)
    unused = next(f for f in report.findings if f.kind == "unused_parameter")
    assert unused.count == 2  # weight and bias of the same layer
    assert report.recommendation.find_unused_parameters
    assert report.recommendation.unused_parameters == ["unused_head.weight", "unused_head.bias"]


def test_inf_is_reported_only_when_it_reaches_the_output(warm: WarmProbe) -> None:
    path = FIXTURES / "pitfalls.py"
    overflow = report_of(warm.probe(path, "Overflow"))
    assert [(f.kind, f.line) for f in overflow.findings] == [
        ("inf", marked_line(path, "expect: inf"))
    ]
    masked = report_of(warm.probe(path, "MaskedAttention", input_spec="(2, 5, 8)"))
    assert masked.findings == []


@pytest.mark.parametrize(
    ("target", "source", "spec"),
    [
        ("TokensAndMask", "example", "(3, 7):int64; (3, 7):bool"),
        ("KeywordInputs", "example", "image=(2, 12), text=(2, 5)"),
        ("LightningStyle", "example", "(5, 6)"),
    ],
)
def test_inputs_the_code_provides_are_used(
    warm: WarmProbe, target: str, source: str, spec: str | None
) -> None:
    report = report_of(warm.probe(FIXTURES / "inputs.py", target))
    assert (report.input.source, report.input.spec) == (source, spec)
    if target == "KeywordInputs":
        paths = {t.path: t.shape for t in report.input.tensors}
        assert paths == {"kwargs['image']": [2, 12], "kwargs['text']": [2, 5]}


def test_a_model_without_a_known_first_layer_needs_an_input(warm: WarmProbe) -> None:
    path = FIXTURES / "inputs.py"
    error = error_of(warm.probe(path, "NoLayers"))
    assert error.kind == "input" and "--input" in error.message
    assert error.file == str(path)
    report = report_of(warm.probe(path, "NoLayers", input_spec="(3, 16)"))
    assert report.input.source == "argument"
    assert report.module("").output_shapes == [[3, 4]]  # type: ignore[union-attr]


def test_constructor_arguments_need_a_hook(warm: WarmProbe) -> None:
    path = FIXTURES / "inputs.py"
    error = error_of(warm.probe(path, "NeedsArguments"))
    assert error.kind == "target" and "example_model" in error.message
    report = report_of(warm.probe(path, "BuiltByHook"))
    assert report.input.spec == "(8, 9)"


def test_graph_breaks_are_reported_when_asked(warm: WarmProbe) -> None:
    path = FIXTURES / "graph_break.py"
    report = report_of(warm.probe(path, "GraphBreak", explain=True))
    breaks = report.graph_breaks
    assert breaks is not None and breaks.error is None
    assert breaks.graph_break_count >= 1
    assert (str(path), marked_line(path, "error-here")) in {(b.file, b.line) for b in breaks.breaks}
    plain = report_of(warm.probe(path, "GraphBreak"))
    assert plain.graph_breaks is None


def test_user_output_never_corrupts_the_event_stream(warm: WarmProbe) -> None:
    report = report_of(warm.probe(FIXTURES / "noisy.py", "Noisy"))
    assert report.target == "Noisy" and report.module("fc") is not None


def test_report_shapes_file_paths_are_absolute(example_reports: dict[str, ProbeReport]) -> None:
    for report in example_reports.values():
        assert Path(report.file).is_absolute()
        assert all(Path(row.file).is_absolute() for row in report.lines)


# CUDA paths: CUDA events, the caching allocator's peaks, the device name. They skip on a
# machine without a GPU and run on one.


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


needs_cuda = pytest.mark.skipif(not cuda_available(), reason="no CUDA device")


@pytest.mark.gpu
@needs_cuda
def test_cuda_probe_uses_events_and_the_allocator(warm: WarmProbe) -> None:
    import torch

    report = report_of(warm.probe(EXAMPLES / "models.py", "SmallCNN", device="cuda"))
    properties = torch.cuda.get_device_properties(0)
    assert report.device.kind == "cuda"
    assert report.device.name == torch.cuda.get_device_name(0)
    assert report.device.total_memory_bytes == properties.total_memory
    assert report.device.capability == f"{properties.major}.{properties.minor}"
    assert report.latency.method == "cuda_events"
    assert 0 < report.latency.forward.median_ms
    memory = report.memory
    assert memory.method == "cuda_allocator"
    params_and_input = report.params.parameter_bytes + 8 * 3 * 32 * 32 * 4
    assert memory.baseline_bytes >= params_and_input
    assert memory.peak_bytes > memory.baseline_bytes
    assert memory.peak_reserved_bytes is not None
    assert memory.peak_reserved_bytes >= memory.peak_bytes
    assert any(op.self_device_ms for op in report.top_ops)
    assert all(row.device_ms is not None for row in report.lines)
    advice = report.recommendation
    assert advice.device_memory_bytes == properties.total_memory
    assert advice.total_fraction == pytest.approx(advice.total_bytes / properties.total_memory)
    assert advice.strategy == "ddp"  # a 137k-parameter CNN fits any GPU


@pytest.mark.gpu
@needs_cuda
def test_auto_picks_the_gpu_and_findings_still_point_at_lines(warm: WarmProbe) -> None:
    path = FIXTURES / "pitfalls.py"
    report = report_of(warm.probe(path, "Overflow", device="auto"))
    assert report.device.kind == "cuda"
    assert ("inf", marked_line(path, "expect: inf")) in {(f.kind, f.line) for f in report.findings}
    # on a GPU the CPU tensor that torch.from_numpy makes in forward cannot be mixed with the
    # input: the error is at the line that mixes them
    error = error_of(warm.probe(path, "Pitfalls", device="auto"))
    assert error.kind == "forward" and "same device" in error.message
    assert error.line == marked_line(path, "expect: float64") + 1


@pytest.mark.skipif(cuda_available(), reason="a CUDA device is present")
def test_asking_for_cuda_without_a_gpu_is_a_clear_error(warm: WarmProbe) -> None:
    error = error_of(warm.probe(EXAMPLES / "models.py", "SmallCNN", device="cuda"))
    assert error.kind == "device" and "torch.cuda.is_available() is False" in error.message


def test_schema_refuses_other_versions_and_unknown_fields(
    example_reports: dict[str, ProbeReport],
) -> None:
    from torchdoctor.probe.schema import SchemaError

    data = example_reports["LSTMTagger"].to_dict()
    with pytest.raises(SchemaError, match="schema 3"):
        ProbeReport.from_dict({**data, "schema": 3})
    # schema 2 is a report with the distributed section (see REPORT.md)
    assert ProbeReport.from_dict({**data, "schema": 2}).latency.forward == example_reports[
        "LSTMTagger"
    ].latency.forward
    extended = {**data, "latency": {**data["latency"], "p99_ms": 1.0}}
    assert ProbeReport.from_dict(extended).latency.forward == example_reports[
        "LSTMTagger"
    ].latency.forward  # newer runners may add fields
    with pytest.raises(SchemaError, match="p99_ms"):
        ProbeReport.from_dict(extended, strict=True)
    with pytest.raises(SchemaError, match="params.total"):
        ProbeReport.from_dict({**data, "params": {**data["params"], "total": "many"}})
