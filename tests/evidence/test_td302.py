"""TD302: modules kept in a plain list or dict are invisible to nn.Module."""

import re

import pytest
import torch
from torch import nn


class Plain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = [nn.Linear(2, 2), nn.Linear(2, 2)]
        self.heads = {"a": nn.Linear(2, 1)}
        self.drop = [nn.Dropout(0.5)]


class Registered(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])
        self.heads = nn.ModuleDict({"a": nn.Linear(2, 1)})
        self.drop = nn.ModuleList([nn.Dropout(0.5)])


def test_plain_containers_are_missing_from_parameters_and_state_dict() -> None:
    module = Plain()
    assert list(module.parameters()) == []
    assert list(module.state_dict()) == []


def test_plain_containers_are_not_converted_by_to() -> None:
    module = Plain().to(torch.float64)
    assert module.layers[0].weight.dtype == torch.float32
    moved = Plain().to("meta")  # the same path .to("cuda") takes
    assert moved.layers[0].weight.device.type == "cpu"


def test_eval_does_not_reach_modules_in_a_list() -> None:
    module = Plain().eval()
    assert module.training is False
    assert module.drop[0].training is True


def test_module_list_and_dict_register_everything() -> None:
    module = Registered()
    assert len(list(module.parameters())) == 6
    assert "layers.0.weight" in module.state_dict() and "heads.a.bias" in module.state_dict()
    module.to(torch.float64).eval()
    assert module.layers[0].weight.dtype == torch.float64
    assert module.drop[0].training is False


def test_mlp_from_the_doc_page_has_no_parameters() -> None:
    class MLP(nn.Module):
        def __init__(self, sizes: list[int]) -> None:
            super().__init__()
            self.layers = [nn.Linear(a, b) for a, b in zip(sizes, sizes[1:], strict=False)]

    assert list(MLP([4, 8, 2]).parameters()) == []


def test_container_methods_the_fix_relies_on() -> None:
    for name in ("append", "extend", "insert", "__getitem__", "__iter__", "__len__"):
        assert hasattr(nn.ModuleList, name)
    for name in ("items", "keys", "values", "update", "pop", "__contains__", "__getitem__"):
        assert hasattr(nn.ModuleDict, name)
    # the ones that make the automatic fix unsafe
    assert not hasattr(nn.ModuleList, "index")
    assert not hasattr(nn.ModuleDict, "get")


def test_module_dict_keys_must_be_strings_without_dots() -> None:
    with pytest.raises(TypeError, match="module name should be a string. Got int"):
        nn.ModuleDict({1: nn.Linear(2, 2)})
    with pytest.raises(KeyError, match=re.escape('contain ".", got: a.b')):
        nn.ModuleDict({"a.b": nn.Linear(2, 2)})


def test_a_choice_table_read_while_building_loses_nothing() -> None:
    """Stays quiet under TD302: the module picked from a plain dict is registered through the
    attribute it is stored in; wrapping the table in ModuleDict would add the unused choice."""

    class Picked(nn.Module):
        def __init__(self, wrap: bool) -> None:
            super().__init__()
            table = {"small": nn.Linear(4, 2), "large": nn.Linear(4, 64)}
            self.choices = nn.ModuleDict(table) if wrap else table
            self.head = self.choices["small"]

    plain, wrapped = Picked(wrap=False), Picked(wrap=True)
    assert sum(p.numel() for p in plain.parameters()) == 4 * 2 + 2
    assert sum(p.numel() for p in wrapped.parameters()) == (4 * 2 + 2) + (4 * 64 + 64)
    assert set(plain.state_dict()) == {"head.weight", "head.bias"}
