"""TD705: torch.compile's keywords and modes in torch 2.13."""

from __future__ import annotations

import inspect

import pytest
import torch
from torchdoctor.analysis.rules.api.symbols import COMPILE_KEYWORDS, COMPILE_MODES


def model() -> torch.nn.Module:
    return torch.nn.Linear(2, 2)


def test_keywords_are_what_the_rule_knows() -> None:
    assert set(inspect.signature(torch.compile).parameters) == COMPILE_KEYWORDS
    assert "dynamic" in COMPILE_KEYWORDS and "dynamic_shapes" not in COMPILE_KEYWORDS


def test_dynamic_shapes_raises_type_error() -> None:
    with pytest.raises(TypeError) as error:
        torch.compile(model(), dynamic_shapes=True)
    assert str(error.value) == "compile() got an unexpected keyword argument 'dynamic_shapes'"


def test_unknown_mode_raises_at_compile_time() -> None:
    expected = (
        "Unrecognized mode=max_autotune, should be one of: default, lite, reduce-overhead, "
        "max-autotune-no-cudagraphs, max-autotune"
    )
    with pytest.raises(RuntimeError) as error:
        torch.compile(model(), mode="max_autotune")
    assert str(error.value) == expected


def test_modes_are_what_the_rule_knows() -> None:
    from torch._inductor import list_mode_options

    assert tuple(list_mode_options()) == COMPILE_MODES


def test_mode_and_options_together_raise() -> None:
    with pytest.raises(RuntimeError) as error:
        torch.compile(model(), mode="max-autotune", options={"triton.cudagraphs": False})
    assert str(error.value) == (
        "Either mode or options can be specified, but both can't be specified at the same time."
    )
