"""TD301: without nn.Module.__init__ the module is never set up. What fails, and where, depends on
what __init__ assigns first; every message below is the one torch 2.13 raises."""

import pytest
import torch
from torch import nn

MODULE_BEFORE_INIT = r"^cannot assign module before Module.__init__\(\) call$"


def test_first_submodule_assignment_raises() -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            self.fc = nn.Linear(2, 2)

    with pytest.raises(AttributeError, match=MODULE_BEFORE_INIT):
        Net()


def test_first_parameter_assignment_raises() -> None:
    class Scaler(nn.Module):
        def __init__(self) -> None:
            self.scale = nn.Parameter(torch.ones(1))

    with pytest.raises(
        AttributeError, match=r"^cannot assign parameters before Module.__init__\(\) call$"
    ):
        Scaler()


def test_register_buffer_raises() -> None:
    class Buffered(nn.Module):
        def __init__(self) -> None:
            self.register_buffer("mask", torch.ones(2))

    with pytest.raises(
        AttributeError, match=r"^cannot assign buffer before Module.__init__\(\) call$"
    ):
        Buffered()


def test_plain_values_construct_but_the_module_is_unusable() -> None:
    """Numbers and plain tensors are stored without complaint: the error comes later."""

    class OnlyConfig(nn.Module):
        def __init__(self) -> None:
            self.p = 0.5
            self.t = torch.zeros(2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.p

    module = OnlyConfig()  # no error here
    assert module.p == 0.5
    missing = r"^'OnlyConfig' object has no attribute '{}'$"
    with pytest.raises(AttributeError, match=missing.format("_backward_hooks")):
        module(torch.ones(1))
    with pytest.raises(AttributeError, match=missing.format("_parameters")):
        list(module.parameters())
    with pytest.raises(AttributeError, match=missing.format("_modules")):
        module.to("cpu")


def test_super_of_nn_module_skips_module_init() -> None:
    class Block(nn.Module):
        def __init__(self) -> None:
            super(nn.Module, self).__init__()  # looks up *after* nn.Module: object.__init__
            self.fc = nn.Linear(2, 2)

    with pytest.raises(AttributeError, match=MODULE_BEFORE_INIT):
        Block()


def test_super_of_an_unrelated_class_raises_type_error() -> None:
    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super(Encoder, self).__init__()  # copied from Encoder
            self.fc = nn.Linear(2, 2)

    with pytest.raises(
        TypeError, match=r"^super\(type, obj\): obj must be an instance or subtype of type$"
    ):
        Decoder()


def test_super_of_a_parent_only_skips_that_parent() -> None:
    """super(Parent, self) in a grandchild still reaches nn.Module.__init__ (TD301 stays quiet):
    only Parent's own layers are missing."""

    class Parent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.base = nn.Linear(2, 2)

    class Child(Parent):
        def __init__(self) -> None:
            super(Parent, self).__init__()
            self.head = nn.Linear(2, 2)

    child = Child()
    assert [name for name, _ in child.named_parameters()] == ["head.weight", "head.bias"]


def test_fixed_module_works() -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x)

    assert Net()(torch.ones(1, 2)).shape == (1, 2)
