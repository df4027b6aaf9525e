"""Analysis stays linear in the size of the file.

A generated file grows from 500 to 4,000 functions; the work `analyse` does is counted as the
number of Python function calls it makes (sys.setprofile), a figure that does not depend on the
machine's load. Doubling the file may at most double the work, with a margin for the
constant costs that do not grow. The rules get the same check one by one, so that a rule that
turns quadratic is named by its own failing case.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torchdoctor.analysis import REGISTRY, Config, Document
from torchdoctor.analysis.context import RuleContext
from torchdoctor.analysis.engine import analyse

ALL = Config(select=("ALL",))
SIZES = (500, 1000, 2000, 4000)  # a quadratic step shows as 4x at every doubling
# growth allowed from one size to the next (twice the functions): 2x, plus 15% for the
# bookkeeping of a larger file (dict resizes, longer sorted lists)
DOUBLING_LIMIT = 2.3

# Each unit is a few functions in the shapes rules look at: training loops with accumulation,
# evaluation loops, helpers called with the loss, loss functions, decorators, model classes.
# `{i}` makes every unit's names unique; the shared names (`model`, `loss`, `evaluate` methods)
# are what a quadratic index would trip over.
UNITS: dict[str, tuple[int, str]] = {
    "training_loop": (
        1,
        """
def train_{i}(model, loader, optimizer, scheduler, criterion):
    model.train()
    total = 0.0
    for step, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        if step % 4 == 0:
            optimizer.step()
            optimizer.zero_grad()
        scheduler.step()
        total += loss
    return total
""",
    ),
    "evaluation_loop": (
        1,
        """
def evaluate_{i}(model, val_loader, criterion):
    model.eval()
    losses = []
    for x, y in val_loader:
        losses.append(criterion(model(x), y))
    return losses
""",
    ),
    "helper_backward": (
        2,
        """
def backprop_{i}(loss, optimizer):
    loss.backward()
    optimizer.step()


def fit_{i}(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        backprop_{i}(torch.nn.functional.mse_loss(model(x), y), optimizer)
""",
    ),
    "trainer_class": (
        3,
        """
class Trainer{i}:
    def step(self, loss):
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def evaluate(self, loader):
        self.model.eval()
        for x, _ in loader:
            self.model(x)

    def fit(self, loader, epochs):
        for epoch in range(epochs):
            self.model.train()
            for x, y in loader:
                self.step(self.criterion(self.model(x), y))
            self.evaluate(loader)
""",
    ),
    "loss_function": (
        1,
        """
def feature_loss_{i}(fake_features, real_features):
    total = 0.0
    for fake, real in zip(fake_features, real_features):
        total += torch.nn.functional.mse_loss(fake, real)
    return total
""",
    ),
    "no_grad_decorator": (
        3,
        """
def quiet_{i}(function):
    def wrapper(*args, **kwargs):
        with torch.no_grad():
            return function(*args, **kwargs)

    return wrapper


@quiet_{i}
def predict_{i}(model, test_loader):
    return [model(x) for x, _ in test_loader]
""",
    ),
    "model_class": (
        2,
        """
class Net{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1), nn.BatchNorm1d(8))

    def forward(self, x):
        return self.body(x).view(x.size(0), -1)
""",
    ),
    "gan_step": (
        1,
        """
def gan_step_{i}(netG, netD, loader, optD, criterion, noise):
    for real, _ in loader:
        optD.zero_grad()
        criterion(netD(real), torch.ones(real.size(0))).backward()
        fake = netG(noise)
        criterion(netD(fake.detach()), torch.zeros(real.size(0))).backward()
        optD.step()
""",
    ),
    "data_loading": (
        1,
        """
def loaders_{i}(dataset, sampler):
    train_loader = DataLoader(dataset, batch_size=32, sampler=sampler, num_workers=2)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for batch in train_loader:
            batch.to("cuda")
""",
    ),
}
HEADER = "import torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader\n"


def generated_file(units: list[str], functions: int) -> str:
    """A file of about `functions` functions, repeating `units` in turn."""
    parts = [HEADER]
    count = index = 0
    while count < functions:
        name = units[index % len(units)]
        size, template = UNITS[name]
        parts.append(template.format(i=index))
        count += size
        index += 1
    return "".join(parts)


def python_calls(work: Callable[[], object]) -> int:
    """How many Python functions `work` calls (comprehensions and generators included)."""
    calls = 0

    def count(frame: object, event: str, argument: object) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    previous = sys.getprofile()
    sys.setprofile(count)
    try:
        work()
    finally:
        sys.setprofile(previous)
    return calls


def assert_near_linear(counts: list[int], what: str) -> None:
    steps = zip(
        zip(SIZES, counts, strict=True), zip(SIZES[1:], counts[1:], strict=True), strict=False
    )
    for (small, smaller_count), (large, larger_count) in steps:
        limit = DOUBLING_LIMIT * max(smaller_count, 1) + 200  # + a constant for tiny rules
        assert larger_count <= limit, (
            f"{what}: {larger_count} calls for {large} functions against {smaller_count} for "
            f"{small}; all sizes {dict(zip(SIZES, counts, strict=True))}"
        )


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(units=st.lists(st.sampled_from(sorted(UNITS)), min_size=2, max_size=5, unique=True))
def test_analyse_work_grows_linearly_with_the_file(units: list[str]) -> None:
    counts = []
    for size in SIZES:
        doc = Document.parse(generated_file(units, size), "generated.py")
        counts.append(python_calls(lambda doc=doc: analyse(doc, ALL)))
    assert_near_linear(counts, f"analyse over units {units}")


@cache
def calls_per_rule() -> dict[str, list[int]]:
    """Per rule, the calls its check makes on the file of every unit, at each size."""
    counts: dict[str, list[int]] = {code: [] for code in REGISTRY.rules}
    for size in SIZES:
        doc = Document.parse(generated_file(sorted(UNITS), size), "generated.py")
        context = RuleContext(doc, doc.semantics, ALL)
        # in one pass: a fact several rules share is paid for by the first rule that asks
        for code, rule in sorted(REGISTRY.rules.items()):
            counts[code].append(
                python_calls(lambda rule=rule, context=context: list(rule.check(context)))
            )
    return counts


@pytest.mark.parametrize("code", sorted(REGISTRY.rules))
def test_each_rule_is_linear(code: str) -> None:
    assert_near_linear(calls_per_rule()[code], code)
