"""The probe on real architectures, each built from its class with no wrapper file: torch's own
(nn.Transformer, an LSTM language model, a CNN), Hugging Face models from small configs (no
downloads), torchvision networks. Every figure is checked against a plain run of the same
model in this process: parameters, output shapes, FLOPs from FlopCounterMode for forward and
forward+backward, in float32, bfloat16 and under autocast."""

from __future__ import annotations

import dataclasses
import importlib.util
import types
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from torchdoctor.probe.build_options import BuildOptions
from torchdoctor.probe.schema import ProbeReport

from .. import torchvision_import
from .conftest import FIXTURES, WarmProbe, needs_torch, plain_flop_counter, report_of

pytestmark = needs_torch


def import_problem(module: str) -> str | None:
    """Why `module` cannot be imported here, or None. transformers imports torchvision for
    its models whenever torchvision is installed, so a broken torchvision breaks both (both
    are imported as the fixtures import them, see tests/torchvision_import.py)."""
    try:
        torchvision_import.importable()
        importlib.import_module(module)
        if module == "transformers":
            from transformers import GPT2LMHeadModel  # noqa: F401 - the lazy import is the check
    except Exception as exc:  # noqa: BLE001 - any import failure is a reason to skip
        cause = exc.__cause__
        why = f" (caused by {type(cause).__name__}: {cause})" if cause else ""
        return f"{module} cannot be imported here: {type(exc).__name__}: {exc}{why}"
    return None


def load_fixture(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"zoo_plain_{Path(name).stem}", FIXTURES / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Case:
    id: str
    fixture: str
    target: str
    build: Callable[[types.ModuleType], torch.nn.Module]
    """The same model, built here the plain way."""
    init: dict[str, Any] | None = None
    input_spec: str | None = None
    dtype: str | None = None
    amp: bool = False
    channels_last: bool = False
    token_high: int = 2
    """Token ids below this in the plain run (the model's vocabulary)."""
    expect_inputs: list[str] = field(default_factory=list)
    """The input paths the probe must have chosen."""
    needs: str | None = None


TINY: dict[str, dict[str, Any]] = {
    "bert": {"vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2,
             "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 32},
    "gpt2": {"vocab_size": 97, "n_positions": 32, "n_embd": 32, "n_layer": 2, "n_head": 2},
    "vit": {"image_size": 32, "patch_size": 8, "num_channels": 3, "hidden_size": 32,
            "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
            "num_labels": 4},
    "bart": {"vocab_size": 96, "d_model": 32, "encoder_layers": 1, "decoder_layers": 1,
             "encoder_attention_heads": 2, "decoder_attention_heads": 2,
             "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "max_position_embeddings": 32},
    "llama": {"vocab_size": 95, "hidden_size": 32, "intermediate_size": 64,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "max_position_embeddings": 32},
}


def config_of(kind: str, class_name: str) -> Callable[[types.ModuleType], Any]:
    def build(module: types.ModuleType) -> Any:
        import transformers

        return getattr(transformers, class_name)(**TINY[kind])

    return build


def hf_case(case_id: str, target: str, kind: str, config: str, **extra: Any) -> Case:
    make_config = config_of(kind, config)
    return Case(
        case_id, "zoo_transformers.py", target,
        lambda module: getattr(module, target)(make_config(module)),
        init={"config": TINY[kind]}, token_high=TINY[kind].get("vocab_size", 2),
        needs="transformers", **extra,
    )


SEQ2SEQ = {"d_model": 32, "nhead": 2}
TEXT_INPUTS = ["kwargs['input_ids']", "kwargs['attention_mask']"]
CASES = [
    Case("nn.Transformer", "zoo_torch.py", "Seq2SeqTransformer",
         lambda m: m.Seq2SeqTransformer(**SEQ2SEQ), init=SEQ2SEQ,
         input_spec="src=(2, 10, 32), tgt=(2, 9, 32)",
         expect_inputs=["kwargs['src']", "kwargs['tgt']"]),
    Case("nn.Transformer-bf16", "zoo_torch.py", "Seq2SeqTransformer",
         lambda m: m.Seq2SeqTransformer(**SEQ2SEQ), init=SEQ2SEQ,
         input_spec="src=(2, 10, 32), tgt=(2, 9, 32)", dtype="bf16",
         expect_inputs=["kwargs['src']", "kwargs['tgt']"]),
    Case("nn.Transformer-amp", "zoo_torch.py", "Seq2SeqTransformer",
         lambda m: m.Seq2SeqTransformer(**SEQ2SEQ), init=SEQ2SEQ,
         input_spec="src=(2, 10, 32), tgt=(2, 9, 32)", amp=True,
         expect_inputs=["kwargs['src']", "kwargs['tgt']"]),
    # built from the `# torchdoctor: init=` comment above the class
    Case("lstm-lm", "zoo_torch.py", "LstmLanguageModel",
         lambda m: m.LstmLanguageModel(vocab_size=120, hidden=24), token_high=120,
         expect_inputs=["args[0]"]),
    Case("lstm-lm-bf16", "zoo_torch.py", "LstmLanguageModel",
         lambda m: m.LstmLanguageModel(vocab_size=120, hidden=24), token_high=120,
         dtype="bfloat16", expect_inputs=["args[0]"]),
    Case("lstm-lm-amp", "zoo_torch.py", "LstmLanguageModel",
         lambda m: m.LstmLanguageModel(vocab_size=120, hidden=24), token_high=120,
         amp=True, expect_inputs=["args[0]"]),
    Case("cnn-channels-last", "zoo_torch.py", "SmallConvNet", lambda m: m.SmallConvNet(),
         input_spec="(4, 3, 32, 32)", channels_last=True, expect_inputs=["args[0]"]),
    hf_case("bert", "SentimentClassifier", "bert", "BertConfig", expect_inputs=["args[0]"]),
    hf_case("gpt2", "Gpt2", "gpt2", "GPT2Config", expect_inputs=TEXT_INPUTS),
    hf_case("vit", "ImageClassifier", "vit", "ViTConfig",
            expect_inputs=["kwargs['pixel_values']"]),
    hf_case("vit-amp", "ImageClassifier", "vit", "ViTConfig", amp=True,
            expect_inputs=["kwargs['pixel_values']"]),
    hf_case("bart", "Summarizer", "bart", "BartConfig",
            expect_inputs=[*TEXT_INPUTS, "kwargs['decoder_input_ids']"]),
    hf_case("llama", "Chat", "llama", "LlamaConfig", expect_inputs=TEXT_INPUTS),
    hf_case("llama-bf16", "Chat", "llama", "LlamaConfig", dtype="bf16",
            expect_inputs=TEXT_INPUTS),
    hf_case("llama-amp", "Chat", "llama", "LlamaConfig", amp=True, expect_inputs=TEXT_INPUTS),
    Case("resnet18", "zoo_torchvision.py", "ResNet18", lambda m: m.ResNet18(),
         input_spec="(2, 3, 64, 64)", expect_inputs=["args[0]"], needs="torchvision"),
    Case("mobilenet-factory-function", "zoo_torchvision.py", "small_mobilenet",
         lambda m: m.small_mobilenet(), input_spec="(2, 3, 64, 64)",
         expect_inputs=["args[0]"], needs="torchvision"),
]


@pytest.fixture(scope="module")
def warm() -> Iterator[WarmProbe]:
    probe = WarmProbe()
    yield probe
    probe.close()


def flatten(value: Any) -> list[torch.Tensor]:
    """Every tensor of a forward's output in order: containers, dicts (Hugging Face outputs
    are dicts), dataclasses."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in flatten(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in flatten(item)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [t for f in dataclasses.fields(value) for t in flatten(getattr(value, f.name))]
    return []


def plain_inputs(
    report: ProbeReport, case: Case, device: str
) -> tuple[list[Any], dict[str, Any]]:
    """Tensors of the shapes and dtypes the probe reports, with valid values, on `device`."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for item in report.input.tensors:
        dtype = getattr(torch, item.dtype)
        if item.path.endswith("['attention_mask']"):
            tensor = torch.ones(item.shape, dtype=dtype)
        elif dtype.is_floating_point:
            tensor = torch.randn(item.shape, dtype=dtype)
        else:
            tensor = torch.randint(0, case.token_high, item.shape, dtype=dtype)
        tensor = tensor.to(device)
        if item.path.startswith("args["):
            args.append(tensor)
        else:
            kwargs[item.path.removeprefix("kwargs['").removesuffix("']")] = tensor
    return args, kwargs


@dataclass
class PlainRun:
    params: int
    output_shapes: list[list[int]]
    flops_forward: int
    flops_forward_backward: int


def plain_run(case: Case, report: ProbeReport, device: str = "cpu") -> PlainRun:
    torch.manual_seed(0)
    model = case.build(load_fixture(case.fixture)).to(device)
    model.train()
    if case.dtype:
        model.to(torch.bfloat16)
    if case.channels_last:
        model.to(memory_format=torch.channels_last)
    args, kwargs = plain_inputs(report, case, device)
    if case.channels_last:
        args = [a.contiguous(memory_format=torch.channels_last) for a in args]
    amp = getattr(torch, autocast_dtype(device))
    autocast = torch.autocast(device, dtype=amp) if case.amp else nullcontext()
    counter = plain_flop_counter()
    with counter:
        with autocast:
            output = model(*args, **kwargs)
        forward = counter.get_total_flops()
        tensors = flatten(output)
        loss = sum(t.float().sum() for t in tensors if t.requires_grad and t.is_floating_point())
        loss.backward()
    return PlainRun(
        params=sum(p.numel() for p in dict.fromkeys(model.parameters())),
        output_shapes=[list(t.shape) for t in tensors],
        flops_forward=forward,
        flops_forward_backward=counter.get_total_flops(),
    )


def autocast_dtype(device: str) -> str:
    """What `--amp` picks: torch's own autocast default on a GPU (float16, with a
    GradScaler), bfloat16 on the CPU."""
    return "float16" if device == "cuda" else "bfloat16"


def cpu_autocast_problem(model: torch.nn.Module, *inputs: torch.Tensor) -> str | None:
    """Why plain torch cannot run `model` under CPU bfloat16 autocast on this machine, or
    None: oneDNN has no bfloat16 LSTM kernel on some CPUs (without AVX-512 it raises "could
    not create a primitive descriptor for the LSTM forward propagation primitive")."""
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(*inputs)
    except RuntimeError as error:
        return f"plain torch cannot run it under CPU bfloat16 autocast on this CPU: {error}"
    return None


def case_problem(case: Case) -> str | None:
    if case.needs:
        return import_problem(case.needs)
    if case.amp and case.target == "LstmLanguageModel":
        lstm = torch.nn.LSTM(8, 8, batch_first=True)
        return cpu_autocast_problem(lstm, torch.randn(2, 3, 8))
    return None


def probe_case(warm: WarmProbe, case: Case, device: str = "cpu") -> ProbeReport:
    build = BuildOptions(
        init=case.init, dtype=case.dtype, amp="auto" if case.amp else None,
        channels_last=case.channels_last,
    )
    final = warm.probe(FIXTURES / case.fixture, case.target, input_spec=case.input_spec,
                       build=build, timing_budget_s=0.2, device=device)
    return report_of(final)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_zoo_model_matches_a_plain_run(warm: WarmProbe, case: Case) -> None:
    problem = case_problem(case)
    if problem:
        pytest.skip(problem)
    report = probe_case(warm, case)
    assert report.device.kind == "cpu"
    assert_matches_plain_run(report, case, plain_run(case, report))


# One of each kind of build on the GPU: float32, bfloat16 weights, autocast, channels-last,
# Hugging Face models and a torchvision network. Grouped-query attention (Llama) is left to
# test_attention_flops.py: before torch 2.13 the plain FlopCounterMode this compares with
# raises on it on a GPU.
GPU_CASES = [case for case in CASES if case.id in {
    "nn.Transformer", "lstm-lm-bf16", "cnn-channels-last", "gpt2", "bart", "vit-amp",
    "resnet18",
}]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the zoo on the GPU")
@pytest.mark.parametrize("case", GPU_CASES, ids=[case.id for case in GPU_CASES])
def test_zoo_model_on_the_gpu_matches_a_plain_cuda_run(warm: WarmProbe, case: Case) -> None:
    problem = import_problem(case.needs) if case.needs else None
    if problem:
        pytest.skip(problem)
    report = probe_case(warm, case, device="cuda")
    assert report.device.kind == "cuda"
    assert report.latency.method == "cuda_events"
    assert report.memory.method == "cuda_allocator"
    assert_matches_plain_run(report, case, plain_run(case, report, device="cuda"), "cuda")
    # the step's peak holds the weights, which live on the GPU, and more
    assert report.memory.peak_bytes > report.params.parameter_bytes


def assert_matches_plain_run(
    report: ProbeReport, case: Case, plain: PlainRun, device: str = "cpu"
) -> None:
    assert [t.path for t in report.input.tensors] == case.expect_inputs
    assert report.params.total == plain.params
    assert report.modules[0].output_shapes == plain.output_shapes
    assert report.flops.forward == plain.flops_forward > 0
    assert report.flops.forward_backward == plain.flops_forward_backward
    precision = report.precision
    assert precision is not None
    assert precision.amp == (autocast_dtype(device) if case.amp else None)
    assert precision.dtype == ("bfloat16" if case.dtype else "float32")
    assert precision.memory_format == ("channels_last" if case.channels_last else "contiguous")
    bytes_per_parameter = 2 if case.dtype else 4
    assert report.params.parameter_bytes == plain.params * bytes_per_parameter
    construction = report.construction
    assert construction is not None
    if case.init:
        assert construction.method == "init"
        assert set(construction.arguments) == set(case.init)
