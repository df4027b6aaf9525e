"""TD710: the naive formulas lose precision or overflow in float32; the fused functions do not."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F


def test_log_one_plus_small_x_is_zero() -> None:
    x = torch.tensor([1e-8])
    assert torch.log(1 + x).item() == 0.0
    assert torch.log1p(x).item() == pytest.approx(1e-8, rel=1e-6)


def test_exp_minus_one_small_x_is_zero() -> None:
    x = torch.tensor([1e-8])
    assert (torch.exp(x) - 1).item() == 0.0
    assert torch.expm1(x).item() == pytest.approx(1e-8, rel=1e-6)


def test_log_sum_exp_overflows_and_underflows() -> None:
    big = torch.tensor([100.0, 200.0, 300.0])
    assert torch.log(torch.sum(torch.exp(big))).item() == float("inf")
    assert torch.logsumexp(big, dim=0).item() == pytest.approx(300.0)
    small = torch.tensor([-200.0, -201.0])
    assert torch.log(torch.sum(torch.exp(small))).item() == float("-inf")
    assert torch.logsumexp(small, dim=0).item() == pytest.approx(-199.6867, abs=1e-4)


def test_logsumexp_needs_dim() -> None:
    with pytest.raises(TypeError, match='missing 1 required positional arguments: "dim"'):
        torch.logsumexp(torch.ones(3))


def test_keepdim_and_dim_carry_over() -> None:
    x = torch.randn(2, 5)
    naive = torch.log(torch.sum(torch.exp(x), 1, keepdim=True))
    assert torch.allclose(naive, torch.logsumexp(x, 1, keepdim=True))
    assert torch.allclose(torch.log(torch.exp(x).sum(-1)), torch.logsumexp(x, -1))


def test_softplus_is_log_one_plus_exp_without_overflow() -> None:
    x = torch.linspace(-20, 20, 101)
    assert torch.allclose(F.softplus(x), torch.log1p(torch.exp(x)), atol=1e-6)
    assert torch.log(1 + torch.exp(torch.tensor(100.0))).item() == float("inf")
    assert F.softplus(torch.tensor(100.0)).item() == 100.0


def test_float32_exp_overflows_just_above_88_7() -> None:
    assert torch.isfinite(torch.exp(torch.tensor(88.7)))
    assert torch.exp(torch.tensor(88.8)).item() == float("inf")


def test_softplus_threshold() -> None:
    x32 = torch.tensor(25.0)
    assert F.softplus(x32).item() == 25.0  # above threshold=20 it returns x
    assert F.softplus(x32).item() == torch.log1p(torch.exp(x32)).item()  # same in float32
    x64 = torch.tensor(25.0, dtype=torch.float64)
    assert F.softplus(x64).item() != torch.log1p(torch.exp(x64)).item()  # not in float64
