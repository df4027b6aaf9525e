"""TD109: accumulating k unscaled losses gives k times the gradient of the combined batch."""

import torch
from torch import nn


def _copy(model: nn.Linear) -> nn.Linear:
    clone = nn.Linear(model.in_features, model.out_features)
    clone.load_state_dict(model.state_dict())
    return clone


def _data(k: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(k)]


def _accumulate(model: nn.Linear, batches, divide_by: int) -> None:
    for x, y in batches:
        (nn.functional.mse_loss(model(x), y) / divide_by).backward()


def _combined(model: nn.Linear, batches) -> None:
    x = torch.cat([b[0] for b in batches])
    y = torch.cat([b[1] for b in batches])
    nn.functional.mse_loss(model(x), y).backward()


def test_unscaled_accumulation_sums_k_gradients() -> None:
    k = 4
    batches = _data(k)
    model = nn.Linear(4, 1)
    unscaled, scaled, combined = _copy(model), _copy(model), _copy(model)
    _accumulate(unscaled, batches, divide_by=1)
    _accumulate(scaled, batches, divide_by=k)
    _combined(combined, batches)

    assert torch.allclose(unscaled.weight.grad, k * combined.weight.grad, atol=1e-6)
    assert torch.allclose(scaled.weight.grad, combined.weight.grad, atol=1e-6)


def test_sgd_step_is_k_times_larger() -> None:
    k = 4
    batches = _data(k)
    model = nn.Linear(4, 1)
    unscaled, combined = _copy(model), _copy(model)
    _accumulate(unscaled, batches, divide_by=1)
    _combined(combined, batches)
    start = model.weight.detach().clone()
    for m in (unscaled, combined):
        torch.optim.SGD(m.parameters(), lr=0.01).step()

    assert torch.allclose(unscaled.weight - start, k * (combined.weight - start), atol=1e-6)


def test_adam_first_step_is_nearly_scale_invariant() -> None:
    k = 4
    batches = _data(k)
    model = nn.Linear(4, 1)
    unscaled, combined = _copy(model), _copy(model)
    _accumulate(unscaled, batches, divide_by=1)
    _combined(combined, batches)
    for m in (unscaled, combined):
        torch.optim.Adam(m.parameters(), lr=0.01).step()

    assert torch.allclose(unscaled.weight, combined.weight, atol=1e-6)


def test_gradient_clipping_sees_k_times_the_norm() -> None:
    k = 4
    batches = _data(k)
    model = nn.Linear(4, 1)
    unscaled, combined = _copy(model), _copy(model)
    _accumulate(unscaled, batches, divide_by=1)
    _combined(combined, batches)

    norm_unscaled = nn.utils.clip_grad_norm_(unscaled.parameters(), float("inf"))
    norm_combined = nn.utils.clip_grad_norm_(combined.parameters(), float("inf"))

    assert torch.allclose(norm_unscaled, k * norm_combined, rtol=1e-5)
