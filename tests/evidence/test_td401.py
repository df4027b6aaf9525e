"""TD401: without no_grad/inference_mode, evaluation records graphs and keeps activations."""

import pytest
import torch
from torch import nn


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).eval()


def _saved_tensors(fn) -> int:  # type: ignore[no-untyped-def]
    count = 0

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        nonlocal count
        count += 1
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return count


def test_outputs_carry_a_graph_without_no_grad() -> None:
    model = _model()
    out = model(torch.randn(4, 8))
    assert out.requires_grad and out.grad_fn is not None


def test_forward_saves_activations_for_a_backward_that_never_comes() -> None:
    model = _model()
    x = torch.randn(4, 8)
    assert _saved_tensors(lambda: model(x)) > 0

    def under_no_grad() -> None:
        with torch.no_grad():
            model(x)

    def under_inference_mode() -> None:
        with torch.inference_mode():
            model(x)

    assert _saved_tensors(under_no_grad) == 0
    assert _saved_tensors(under_inference_mode) == 0


def test_collected_outputs_keep_every_graph_alive() -> None:
    layer = nn.Linear(8, 2)
    inputs = [torch.randn(4, 8) for _ in range(3)]
    outputs = [layer(x) for x in inputs]
    assert all(o.grad_fn is not None for o in outputs)
    # the first batch's input is still held by its graph after the loop
    assert torch.equal(outputs[0].grad_fn._saved_mat1, inputs[0])
    model = _model()
    with torch.inference_mode():
        clean = [model(torch.randn(4, 8)) for _ in range(3)]
    assert all(o.grad_fn is None and not o.requires_grad for o in clean)


def test_inference_tensors_cannot_join_autograd_later() -> None:
    """Why the fix is marked unsafe: inference_mode outputs cannot be saved for backward."""
    with torch.inference_mode():
        features = torch.randn(3)
    weight = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"^Inference tensors cannot be saved for backward\."):
        (weight * features).sum().backward()
