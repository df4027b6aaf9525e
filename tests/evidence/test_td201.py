"""TD201: `.view()` that merges dimensions of a transposed/permuted/expanded tensor raises;
views that only split, `.reshape()` and `.contiguous().view()` work; conv2d takes the
non-contiguous tensor as it is."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

VIEW_ERROR = (
    "view size is not compatible with input tensor's size and stride (at least one dimension "
    "spans across two contiguous subspaces). Use .reshape(...) instead."
)
B, T, NH, HS = 2, 5, 3, 4
C = NH * HS


def _queries() -> torch.Tensor:
    return torch.randn(B, T, C).view(B, T, NH, HS).transpose(1, 2)  # (B, NH, T, HS)


def _attention_output() -> torch.Tensor:
    q = _queries()
    att = F.softmax(q @ q.transpose(-2, -1), dim=-1)
    return att @ q  # a fresh, contiguous (B, NH, T, HS) tensor


# every `# expect: TD201` shape of the positive fixture, run for real
FLAGGED = {
    "attention transpose(1, 2).view(B, T, C)": lambda: (
        _attention_output().transpose(1, 2).view(B, T, C)
    ),
    "permute(0, 2, 1, 3).view(b, -1)": lambda: (
        torch.randn(2, 3, 4, 5).permute(0, 2, 1, 3).view(2, -1)
    ),
    "t().view(-1)": lambda: torch.randn(3, 4).t().view(-1),
    ".T.view(-1)": lambda: torch.randn(3, 4).T.view(-1),
    "torch.transpose(x, 0, 1).view(-1)": lambda: torch.transpose(torch.randn(3, 4, 2), 0, 1).view(
        -1
    ),
    "permute(0, 2, 3, 1).view(B, -1)": lambda: (
        torch.randn(2, 3, 4, 5).permute(0, 2, 3, 1).view(2, -1)
    ),
    "unsqueeze(1).expand(B, k, D).view(B * k, D)": lambda: (
        torch.randn(2, 4).unsqueeze(1).expand(2, 3, 4).view(6, 4)
    ),
    "movedim(1, 3).view(-1)": lambda: torch.randn(2, 3, 4, 5).movedim(1, 3).view(-1),
    "transpose(1, 2).view(2, 8, 64) of a 4-d tensor": lambda: (
        torch.randn(2, 4, 8, 16).transpose(1, 2).view(2, 8, 64)
    ),
    "swapaxes(-1, -2).view(-1)": lambda: torch.randn(3, 4).swapaxes(-1, -2).view(-1),
}

# the negative fixture's look-alikes, run for real
QUIET = {
    "transpose(1, 2).view(B, C, H, W) only splits": lambda: (
        torch.randn(2, 12, 5).transpose(1, 2).view(2, 5, 3, 4)
    ),
    "contiguous().view": lambda: _attention_output().transpose(1, 2).contiguous().view(B, T, C),
    "reshape": lambda: _attention_output().transpose(1, 2).reshape(B, T, C),
    "permute(0, 2, 3, 1).view(B, -1, C) merges adjacent H, W": lambda: (
        torch.randn(2, 3, 4, 5).permute(0, 2, 3, 1).view(2, -1, 3)
    ),
    "narrow(0, ...).view(-1)": lambda: torch.randn(4, 5).narrow(0, 0, 2).view(-1),
    "expand(...).view(same shape)": lambda: (
        torch.randn(2, 4).unsqueeze(1).expand(2, 3, 4).view(2, 3, 4)
    ),
    "permute(0, 2, 1).view(same shape)": lambda: (
        torch.randn(2, 3, 4).permute(0, 2, 1).view(2, 4, 3)
    ),
    "t().t().view(-1)": lambda: torch.randn(3, 4).t().t().view(-1),
    "sdpa keeps the query layout": lambda: (
        F.scaled_dot_product_attention(_queries(), _queries(), _queries())
        .transpose(1, 2)
        .view(B, T, C)
    ),
}


@pytest.mark.parametrize("snippet", list(FLAGGED), ids=list(FLAGGED))
def test_flagged_views_raise(snippet: str) -> None:
    with pytest.raises(RuntimeError) as raised:
        FLAGGED[snippet]()
    assert str(raised.value) == VIEW_ERROR


@pytest.mark.parametrize("snippet", list(QUIET), ids=list(QUIET))
def test_look_alikes_work(snippet: str) -> None:
    assert isinstance(QUIET[snippet](), torch.Tensor)


def test_contiguous_view_equals_reshape() -> None:
    y = _attention_output()
    assert torch.equal(
        y.transpose(1, 2).contiguous().view(B, T, C), y.transpose(1, 2).reshape(B, T, C)
    )


def test_conv2d_accepts_a_non_contiguous_input() -> None:
    channels_last = torch.randn(1, 8, 8, 3).permute(0, 3, 1, 2)
    assert not channels_last.is_contiguous()
    out = nn.Conv2d(3, 4, 3)(channels_last)
    assert out.shape == (1, 4, 6, 6)
