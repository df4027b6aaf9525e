"""TD713: size_average/reduce warn and map to `reduction` exactly as the rule computes."""

from __future__ import annotations

import ast
import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torchdoctor.analysis.rules.api.td713_deprecated_loss_args import _legacy_reduction


@pytest.mark.parametrize(
    ("size_average", "reduce"), list(itertools.product((None, True, False), repeat=2))[1:]
)
def test_warning_names_the_reduction_the_rule_computes(size_average, reduce) -> None:
    keywords = [
        ast.keyword(arg=name, value=ast.Constant(value))
        for name, value in (("size_average", size_average), ("reduce", reduce))
        if value is not None
    ]
    expected = _legacy_reduction(keywords)
    with pytest.warns(UserWarning) as caught:
        loss = nn.MSELoss(size_average=size_average, reduce=reduce)
    assert str(caught[0].message) == (
        f"size_average and reduce args will be deprecated, please use reduction='{expected}' "
        "instead."
    )
    assert loss.reduction == expected


def test_legacy_arguments_override_reduction() -> None:
    pred, target = torch.tensor([1.0, 2.0]), torch.tensor([0.0, 0.0])
    with pytest.warns(UserWarning):
        value = F.mse_loss(pred, target, size_average=False, reduction="mean")
    assert value.item() == F.mse_loss(pred, target, reduction="sum").item() == 5.0
