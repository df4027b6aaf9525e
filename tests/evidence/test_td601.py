"""TD601: under DistributedDataParallel, a parameter that gets no gradient makes the next
iteration raise unless the model was wrapped with find_unused_parameters=True."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

MESSAGE_START = (
    "Expected to have finished reduction in the prior iteration before starting a new one. "
    "This error indicates that your module has parameters that were not used in producing loss."
)


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.used = nn.Linear(2, 2)
        self.unused = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(x)


@pytest.fixture
def process_group(tmp_path: Path) -> Iterator[None]:
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_unused_parameter_raises_on_the_next_iteration(process_group: None) -> None:
    model = DDP(TwoHeads())
    model(torch.randn(3, 2)).sum().backward()  # the first iteration passes
    assert model.module.unused.weight.grad is None
    with pytest.raises(RuntimeError) as raised:
        model(torch.randn(3, 2)).sum().backward()
    assert str(raised.value).startswith(MESSAGE_START)
    assert "find_unused_parameters=True" in str(raised.value)


def test_find_unused_parameters_lets_it_run(process_group: None) -> None:
    model = DDP(TwoHeads(), find_unused_parameters=True)
    for _ in range(3):
        model(torch.randn(3, 2)).sum().backward()
    assert model.module.unused.weight.grad is None
