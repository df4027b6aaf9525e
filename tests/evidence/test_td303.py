"""TD303: model.forward(x) runs the layers but none of the module's hooks."""

import torch
from torch import nn


def test_forward_skips_hooks_and_call_runs_them() -> None:
    model = nn.Linear(2, 2)
    seen: list[str] = []
    model.register_forward_pre_hook(lambda m, args: seen.append("pre"))
    model.register_forward_hook(lambda m, args, out: seen.append("post"))
    x = torch.ones(1, 2)

    direct = model.forward(x)
    assert seen == []

    called = model(x)
    assert seen == ["pre", "post"]
    assert torch.equal(direct, called)


def test_forward_skips_hooks_on_submodules_called_that_way() -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Linear(2, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.encoder.forward(x)

    net = Net()
    features: list[torch.Tensor] = []
    net.encoder.register_forward_hook(lambda m, args, out: features.append(out))
    net(torch.ones(1, 2))
    assert features == []


def test_forward_skips_backward_hooks() -> None:
    model = nn.Linear(2, 1)
    calls: list[int] = []
    model.register_full_backward_hook(lambda m, gin, gout: calls.append(1))
    model.forward(torch.ones(1, 2, requires_grad=True)).sum().backward()
    assert calls == []
    model(torch.ones(1, 2, requires_grad=True)).sum().backward()
    assert calls == [1]
