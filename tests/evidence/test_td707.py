"""TD707: functions torch removed raise in torch 2.13; their replacements give the old answer."""

from __future__ import annotations

import pytest
import torch
from torchdoctor.analysis import Config, check

REMOVED_STUBS = {
    "solve": lambda A, B: torch.solve(B, A),
    "symeig": lambda A, B: torch.symeig(A),
    "matrix_rank": lambda A, B: torch.matrix_rank(A),
    "lstsq": lambda A, B: torch.lstsq(B, A),
    "eig": lambda A, B: torch.eig(A),
}


def system() -> tuple[torch.Tensor, torch.Tensor]:
    A = torch.tensor([[4.0, 1.0], [1.0, 3.0]])
    B = torch.tensor([[1.0], [2.0]])
    return A, B


@pytest.mark.parametrize("name", sorted(REMOVED_STUBS))
def test_removed_linalg_functions_raise(name: str) -> None:
    A, B = system()
    with pytest.raises(RuntimeError) as error:
        REMOVED_STUBS[name](A, B)
    assert str(error.value).startswith(
        "This function was deprecated since version 1.9 and is now removed."
    )


def test_other_removed_names() -> None:
    with pytest.raises(AttributeError, match="module 'torch' has no attribute 'set_deterministic'"):
        torch.set_deterministic(True)
    with pytest.raises(AttributeError, match="module 'torch' has no attribute 'is_deterministic'"):
        torch.is_deterministic()
    with pytest.raises(AttributeError, match="module 'torch' has no attribute 'rfft'"):
        torch.rfft(torch.ones(4), 1)
    with pytest.raises(TypeError, match="'module' object is not callable"):
        torch.fft(torch.ones(4))
    with pytest.raises(ModuleNotFoundError, match="No module named 'torch._six'"):
        __import__("torch._six")


def test_linalg_solve_takes_the_arguments_the_other_way_round() -> None:
    A, B = system()
    X = torch.linalg.solve(A, B)  # what torch.solve(B, A).solution returned
    assert torch.allclose(A @ X, B)


def test_renamed_determinism_switches_exist() -> None:
    before = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(before)


def test_rule_reports_deprecated_before_the_removal() -> None:
    source = "import torch\nx = torch.solve(b, A)\n"
    old = check(source, "x.py", Config(select=("TD707", "TD708"), target_torch=(1, 12)))
    new = check(source, "x.py", Config(select=("TD707", "TD708"), target_torch=(2, 13)))
    assert [f.code for f in old] == ["TD708"]
    assert [f.code for f in new] == ["TD707"]
