"""TD703: torch.cuda.amp / torch.cpu.amp are deprecated in favour of torch.amp with a device."""

from __future__ import annotations

import inspect
import warnings

import pytest
import torch
from torchdoctor.analysis import Config, check


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: torch.cuda.amp.autocast(enabled=False),
            "`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
            "`torch.amp.autocast('cuda', args...)` instead.",
        ),
        (
            lambda: torch.cuda.amp.GradScaler(enabled=False),
            "`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
            "`torch.amp.GradScaler('cuda', args...)` instead.",
        ),
        (
            lambda: torch.cpu.amp.autocast(),
            "`torch.cpu.amp.autocast(args...)` is deprecated. Please use "
            "`torch.amp.autocast('cpu', args...)` instead.",
        ),
        (
            lambda: torch.cuda.amp.custom_fwd(lambda x: x),
            "`torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use "
            "`torch.amp.custom_fwd(args..., device_type='cuda')` instead.",
        ),
    ],
)
def test_old_spellings_warn(build, message: str) -> None:
    with pytest.warns(FutureWarning) as caught:
        build()
    assert message in [str(w.message) for w in caught]


def test_new_spellings_are_silent() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with torch.amp.autocast("cuda", enabled=False):
            pass
        torch.amp.GradScaler("cuda", enabled=False)
        torch.amp.custom_fwd(lambda x: x, device_type="cuda")


def test_the_defaults_match() -> None:
    # the old classes default to float16 (cuda) and bfloat16 (cpu); torch.amp reads the same
    assert torch.get_autocast_dtype("cuda") == torch.float16
    assert torch.get_autocast_dtype("cpu") == torch.bfloat16
    assert issubclass(torch.cuda.amp.autocast, torch.amp.autocast)


def test_positional_order_differs() -> None:
    old = list(inspect.signature(torch.cuda.amp.autocast.__init__).parameters)[1:3]
    new = list(inspect.signature(torch.amp.autocast.__init__).parameters)[1:3]
    assert old == ["enabled", "dtype"]
    assert new == ["device_type", "dtype"]


def test_rule_applies_from_torch_2_4() -> None:
    source = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"
    assert check(source, "x.py", Config(select=("TD703",), target_torch=(2, 3))) == []
    assert check(source, "x.py", Config(select=("TD703",), target_torch=(2, 4)))
