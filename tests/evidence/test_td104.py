"""TD104: accumulating loss tensors keeps every iteration's graph alive; in a loop without
backward() it keeps every iteration's activations too. `.item()` keeps nothing."""

import gc
import weakref

import torch
from torch import nn


def _count_nodes(grad_fn, name: str) -> int:
    seen, stack, count = set(), [grad_fn], 0
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        count += type(node).__name__ == name
        stack.extend(next_node for next_node, _ in node.next_functions)
    return count


def _loop(accumulate_tensor: bool, backward: bool, iterations: int = 5):
    model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    activations = []
    total = 0.0
    for _ in range(iterations):
        hidden = model[1](model[0](torch.randn(8, 4)))
        activations.append(weakref.ref(hidden))
        loss = nn.functional.mse_loss(model[2](hidden), torch.randn(8, 1))
        if backward:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        total += loss if accumulate_tensor else loss.item()
        del hidden, loss
    gc.collect()
    alive = sum(ref() is not None for ref in activations)
    return total, alive


def test_training_loop_total_keeps_every_graph_linked() -> None:
    total, alive = _loop(accumulate_tensor=True, backward=True)
    assert isinstance(total, torch.Tensor) and total.requires_grad
    assert _count_nodes(total.grad_fn, "MseLossBackward0") == 5
    assert alive == 0  # backward() freed the saved activations themselves


def test_loop_without_backward_keeps_every_activation_alive() -> None:
    _, alive = _loop(accumulate_tensor=True, backward=False)
    assert alive == 5


def test_item_keeps_nothing() -> None:
    total, alive = _loop(accumulate_tensor=False, backward=False)
    assert isinstance(total, float)
    assert alive == 0
