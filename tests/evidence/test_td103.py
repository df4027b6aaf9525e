"""TD103: a second backward() through a freed graph raises; retain_graph=True on the first
call makes it work."""

import pytest
import torch
from torch import nn

MESSAGE = "Trying to backward through the graph a second time"


def _gan_parts():
    generator = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    discriminator = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    return generator, discriminator, nn.BCEWithLogitsLoss(), torch.randn(4, 8)


def test_shared_forward_output_raises_on_the_second_backward() -> None:
    generator, discriminator, bce, noise = _gan_parts()
    fake = generator(noise)
    d_loss = bce(discriminator(fake), torch.zeros(4, 1))
    d_loss.backward()
    g_loss = bce(discriminator(fake), torch.ones(4, 1))
    with pytest.raises(RuntimeError, match=MESSAGE):
        g_loss.backward()


def test_retain_graph_on_the_first_call_fixes_it() -> None:
    generator, discriminator, bce, noise = _gan_parts()
    fake = generator(noise)
    bce(discriminator(fake), torch.zeros(4, 1)).backward(retain_graph=True)
    bce(discriminator(fake), torch.ones(4, 1)).backward()
    assert generator[0].weight.grad is not None


def test_detach_in_the_discriminator_step_avoids_it() -> None:
    generator, discriminator, bce, noise = _gan_parts()
    fake = generator(noise)
    bce(discriminator(fake.detach()), torch.zeros(4, 1)).backward()
    bce(discriminator(fake), torch.ones(4, 1)).backward()


def test_loss_computed_before_the_loop_raises_on_the_second_iteration() -> None:
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1))
    iterations = 0
    with pytest.raises(RuntimeError, match=MESSAGE):
        for _ in range(3):
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            iterations += 1
    assert iterations == 1
