"""Building the model to probe: --init, the init comment, --factory, library configs, and
--dtype/--amp/--channels-last as options (their figures are checked in test_zoo.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from torchdoctor.probe.build_options import BuildOptionError, BuildOptions
from torchdoctor.probe.client import ProbeArgumentError, ProbeOptions
from torchdoctor.probe.construct import plan_arguments
from torchdoctor.probe.init_args import InitArgumentError, init_comment, parse_factory, parse_init
from torchdoctor.probe.input_spec import parse_call

from ..conftest import ROOT
from .conftest import FIXTURES, WarmProbe, error_of, needs_torch, report_of

MODEL = FIXTURES / "construction.py"
BUILD_OPTIONS = [
    "--input", "--init", "--factory", "--dtype", "--amp", "--amp-dtype", "--channels-last",
]


# -- reading the options (no torch) ---------------------------------------------------------


def test_init_json_is_a_keyword_object() -> None:
    assert parse_init('{"num_classes": 5, "dims": [1, 2]}') == {"num_classes": 5, "dims": [1, 2]}
    with pytest.raises(InitArgumentError, match="not JSON .* position 17"):
        parse_init('{"num_classes": }')
    with pytest.raises(InitArgumentError, match="JSON object of keyword arguments, not list"):
        parse_init("[1, 2]")
    with pytest.raises(InitArgumentError, match="not argument names"):
        parse_init('{"not a name": 1}')


def test_factory_is_module_colon_function() -> None:
    assert parse_factory("models.zoo:make_model") == ("models.zoo", "make_model")
    assert parse_factory("torchvision.models:resnet18") == ("torchvision.models", "resnet18")
    for bad in ("make_model", "a:b:c", "os:system('x')", "mod:"):
        with pytest.raises(InitArgumentError, match="module:function"):
            parse_factory(bad)


def test_the_init_comment_belongs_to_its_class() -> None:
    source = MODEL.read_text(encoding="utf-8")
    found = init_comment(source, "FromComment")
    assert found is not None and found.arguments == {"width": 6}
    assert "FromComment" in source.splitlines()[found.line - 1]
    assert init_comment(source, "NeedsArgs") is None
    with pytest.raises(InitArgumentError, match="init comment on line"):
        init_comment(source, "BrokenComment")
    above = "import torch\n\n# torchdoctor: init={\"a\": 1}\n@decorate\nclass M:\n    pass\n"
    assert init_comment(above, "M").arguments == {"a": 1}  # type: ignore[union-attr]
    apart = "# torchdoctor: init={\"a\": 1}\nx = 1\nclass M:\n    pass\n"
    assert init_comment(apart, "M") is None  # code in between: it is not about M


def test_build_options_are_checked_before_anything_starts(tmp_path: Path) -> None:
    assert BuildOptions(dtype="bf16", amp="fp16").validated() == BuildOptions(
        dtype="bfloat16", amp="float16"
    )
    for bad, words in [
        (BuildOptions(dtype="int64"), "--dtype must be one of"),
        (BuildOptions(dtype="bf17"), "unknown dtype"),
        (BuildOptions(amp="float64"), "--amp takes"),
        (BuildOptions(factory="nope"), "module:function"),
        (BuildOptions(init={"a": 1}, factory="m:f"), "takes no --init"),
        (BuildOptions(init={"a": object()}), "JSON values"),
    ]:
        with pytest.raises(BuildOptionError, match=words):
            bad.validated()
    options = ProbeOptions(
        str(MODEL), "NeedsArgs",
        build=BuildOptions(init={"hidden": 3}, dtype="bf16", amp="auto", channels_last=True),
    ).validated()
    arguments = options.runner_arguments()
    assert arguments[arguments.index("--init") + 1] == '{"hidden": 3}'
    assert arguments[arguments.index("--dtype") + 1] == "bfloat16"
    assert "--amp" in arguments and "--channels-last" in arguments
    request = options.worker_request("1")
    assert request["init"] == {"hidden": 3}
    assert (request["dtype"], request["amp"]) == ("bfloat16", "auto")
    with pytest.raises(ProbeArgumentError):
        ProbeOptions(str(MODEL), "NeedsArgs", build=BuildOptions(dtype="int8")).validated()


def test_keyword_and_dict_inputs_pass_the_client_check() -> None:
    for spec in ("input_ids=(4, 128):int64[0,50257), attention_mask=(4, 128):bool",
                 "{'image': (2, 3, 8, 8), \"label\": (2,):long}", "(2, 3):float[-1.5,1.5)"):
        ProbeOptions(str(MODEL), "DictBatch", input_spec=spec).validated()
        parse_call(spec)
    for spec in ("(2, 4) | tee x", "input_ids=$(x)", "`x`", "(2,4) > out"):
        with pytest.raises(ProbeArgumentError):
            ProbeOptions(str(MODEL), "DictBatch", input_spec=spec).validated()


class Plain:
    def __init__(self, a: int, b: int = 2, *, c: str) -> None:
        pass


class Open:
    def __init__(self, a: int, **options: object) -> None:
        pass


def test_argument_plan_names_what_is_missing_and_what_is_unknown() -> None:
    plan = plan_arguments(Plain, {"a": 1, "z": 3})
    assert plan.kwargs == {"a": 1} and plan.missing == ["c"] and plan.unknown == ["z"]
    assert plan_arguments(Open, {"a": 1, "z": 3}).kwargs == {"a": 1, "z": 3}


def test_every_build_option_is_in_help_readme_and_report_doc() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "torchdoctor.cli", "probe", "--help"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    report_doc = (ROOT / "server/torchdoctor/probe/REPORT.md").read_text(encoding="utf-8")
    for option in BUILD_OPTIONS:
        assert option in shown, option
        assert f"`{option}" in readme, f"README does not document {option}"
        assert f"`{option}" in report_doc, f"REPORT.md does not document {option}"


# -- probing (real torch in the runner) ------------------------------------------------------


@pytest.fixture(scope="module")
def warm() -> Iterator[WarmProbe]:
    probe = WarmProbe()
    yield probe
    probe.close()


@needs_torch
def test_a_constructor_that_needs_arguments_says_which_and_how(warm: WarmProbe) -> None:
    error = error_of(warm.probe(MODEL, "NeedsArgs"))
    assert error.kind == "target"
    assert "num_classes, hidden" in error.message and "--init" in error.message
    assert "# torchdoctor: init=" in error.message
    assert error.file == str(MODEL) and error.line == 7
    unknown = error_of(warm.probe(MODEL, "NeedsArgs", build=BuildOptions(init={"hiden": 3})))
    assert unknown.kind == "target" and "'hiden'" in unknown.message


@needs_torch
def test_init_arguments_build_the_model(warm: WarmProbe) -> None:
    build = BuildOptions(init={"num_classes": 5, "hidden": 7, "bias": False})
    report = report_of(warm.probe(MODEL, "NeedsArgs", build=build))
    assert report.params.total == 4 * 7 + 7 * 5 + 5  # the body has no bias
    assert report.construction is not None and report.construction.method == "init"
    assert report.construction.arguments == {"num_classes": "5", "hidden": "7", "bias": "False"}
    assert report.modules[0].output_shapes == [[8, 5]]


@needs_torch
def test_the_init_comment_builds_the_model_and_a_broken_one_points_at_itself(
    warm: WarmProbe,
) -> None:
    report = report_of(warm.probe(MODEL, "FromComment"))
    assert report.construction is not None and report.construction.method == "comment"
    assert report.params.total == 4 * 6 + 6
    error = error_of(warm.probe(MODEL, "BrokenComment"))
    assert error.kind == "target" and error.line == 26 and "not JSON" in error.message


@needs_torch
def test_a_factory_next_to_the_file_builds_the_model(warm: WarmProbe) -> None:
    build = BuildOptions(factory="construction_factories:wide")
    report = report_of(warm.probe(MODEL, "NeedsArgs", build=build))
    assert report.construction is not None and report.construction.method == "factory"
    assert report.params.total == 4 * 32 + 32 + 32 * 3 + 3
    missing = error_of(warm.probe(MODEL, "NeedsArgs", build=BuildOptions(factory="nowhere:f")))
    assert missing.kind == "import" and "nowhere" in missing.message


@needs_torch
def test_a_dict_input_is_shown_tensor_by_tensor_and_pinnable(warm: WarmProbe) -> None:
    report = report_of(warm.probe(MODEL, "DictBatch"))
    assert [(t.path, t.shape, t.dtype) for t in report.input.tensors] == [
        ("args[0]['image']", [2, 3, 8, 8], "float32"),
        ("args[0]['label']", [2], "int64"),
    ]
    assert report.input.spec is not None
    pinned = report_of(warm.probe(MODEL, "DictBatch", input_spec=report.input.spec))
    assert pinned.input.source == "argument"
    assert [t.shape for t in pinned.input.tensors] == [t.shape for t in report.input.tensors]
    assert pinned.flops.forward == report.flops.forward


@needs_torch
def test_a_low_precision_input_converts_the_model(warm: WarmProbe) -> None:
    report = report_of(warm.probe(MODEL, "FromComment", input_spec="(2, 4):bf16"))
    assert report.precision is not None
    assert (report.precision.dtype, report.precision.dtype_source) == ("bfloat16", "input")
    assert report.modules[0].output_shapes == [[2, 6]]


def transformers_problem() -> str | None:
    try:
        from transformers import (
            BertModel,  # noqa: F401 - the lazy model import is the check
            PretrainedConfig,  # noqa: F401
        )
    except Exception as exc:  # noqa: BLE001 - any import failure is a reason to skip
        return f"transformers cannot be imported here: {exc} (cause: {exc.__cause__})"
    return None


@needs_torch
def test_a_library_config_argument_gets_its_class_defaults(warm: WarmProbe) -> None:
    problem = transformers_problem()
    if problem or importlib.util.find_spec("transformers") is None:
        pytest.skip(problem or "transformers is not installed")
    report = report_of(warm.probe(FIXTURES / "zoo_transformers.py", "TinyTextModel"))
    assert report.construction is not None
    assert report.construction.arguments == {"config": "TinyTextConfig() (its defaults)"}
    assert report.params.total == 64 * 16 + 16 * 2 + 2  # the config's default sizes
