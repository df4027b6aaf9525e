"""Function summaries and model contents, as the training and evaluation rules read them."""

from __future__ import annotations

import ast
import textwrap

from torchdoctor.analysis import Config, Document, check
from torchdoctor.analysis.mode_layers import constructor_mode_layers
from torchdoctor.analysis.summaries import summaries_of

ALL = Config(select=("ALL",))


def _summaries(source: str):  # type: ignore[no-untyped-def]
    doc = Document.parse(textwrap.dedent(source), "t.py")
    return doc.semantics, summaries_of(doc.semantics)


def _function(sem, name: str):  # type: ignore[no-untyped-def]
    return next(f for f in sem.functions if f.name == name)


def test_backward_on_a_parameter_reaches_the_callers_that_pass_theirs() -> None:
    sem, summaries = _summaries(
        """
        def apply(loss, optimizer):
            loss.backward()
            optimizer.step()

        def train_step(batch_loss, optimizer):
            apply(batch_loss, optimizer)

        def report(value):
            print(value)
        """
    )
    assert summaries.of(_function(sem, "apply")).backward_parameters == {"loss"}
    caller = summaries.of(_function(sem, "train_step"))
    assert caller.calls_backward and caller.steps_optimizer
    assert caller.backward_parameters == {"batch_loss"}
    assert not summaries.of(_function(sem, "report")).trains


def test_a_decorator_that_wraps_the_call_in_no_grad_marks_what_it_decorates() -> None:
    sem, summaries = _summaries(
        """
        import torch

        def frozen(function):
            def wrapper(*args):
                with torch.inference_mode():
                    return function(*args)
            return wrapper

        def logged(function):
            def wrapper(*args):
                print("call")
                return function(*args)
            return wrapper

        @frozen
        def predict(model, x):
            return model(x)

        @logged
        def fit(model, x):
            return model(x)
        """
    )
    assert summaries.of(_function(sem, "frozen")).wraps_in_no_grad
    assert summaries.of(_function(sem, "predict")).runs_without_grad
    assert not summaries.of(_function(sem, "fit")).runs_without_grad


def test_unknown_callees_given_the_loss_or_optimizer_may_train_and_loggers_do_not() -> None:
    sem, summaries = _summaries(
        """
        def loop(model, loader, optimizer, scaler, writer, criterion):
            for x, y in loader:
                loss = criterion(model(x), y)
                scaler(loss, optimizer)
                writer.add_scalar("loss", loss)
                print(loss)
        """
    )
    calls = {ast.unparse(c.func): c for c in sem.calls}
    assert summaries.may_train(calls["scaler"])
    assert not summaries.may_train(calls["writer.add_scalar"])
    assert not summaries.may_train(calls["print"])


def test_gradient_averaging_is_rescaling_not_zeroing() -> None:
    sem, summaries = _summaries(
        """
        def average(model, n):
            for p in model.parameters():
                p.grad.mul_(1 / n)

        def clear(model):
            for p in model.parameters():
                p.grad.mul_(0)
        """
    )
    average = summaries.of(_function(sem, "average"))
    assert average.rescales_gradients and not average.zeroes_gradients
    assert summaries.of(_function(sem, "clear")).zeroes_gradients


def test_model_contents_come_from_the_constructor_and_unknown_is_empty() -> None:
    doc = Document.parse(
        textwrap.dedent(
            """
            import torchvision
            from torch import nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.drop = nn.Dropout(0.3)
                    self.off = nn.Dropout(0.0)

            a = Net()
            b = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
            c = torchvision.models.vgg16_bn()
            d = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
            e = make_model()
            """
        ),
        "t.py",
    )
    sem = doc.semantics
    values = {
        a.targets[0].id: a.value
        for a in sem.assigns
        if isinstance(a, ast.Assign) and isinstance(a.targets[0], ast.Name)
    }
    assert constructor_mode_layers(sem, values["a"]) == ["Dropout"]
    assert constructor_mode_layers(sem, values["b"]) == ["BatchNorm1d"]
    assert constructor_mode_layers(sem, values["c"]) == ["BatchNorm2d", "Dropout"]
    assert constructor_mode_layers(sem, values["d"]) == []
    assert constructor_mode_layers(sem, values["e"]) == []


def test_td402_names_the_layers_that_change_in_eval_mode() -> None:
    source = textwrap.dedent(
        """
        import torch
        from torch import nn

        model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.BatchNorm1d(4))

        @torch.no_grad()
        def evaluate(test_loader):
            for x, _ in test_loader:
                model(x)
        """
    )
    (finding,) = [f for f in check(source, "t.py", ALL) if f.code == "TD402"]
    assert "`Dropout`, `BatchNorm1d`" in finding.message
