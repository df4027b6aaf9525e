"""A tiny GAN on 2-D points drawn from a ring.

Planted pitfall, found by `torchdoctor check examples/`:
  - the generator loss back-propagates through `fake` after the discriminator's backward
    already freed that graph (TD103): the first iteration raises at run time
"""

import math

import torch
from torch import nn


def ring(n: int) -> torch.Tensor:
    angles = torch.rand(n) * 2 * math.pi
    return torch.stack([angles.cos(), angles.sin()], dim=1)


def train(steps: int = 50, batch: int = 64) -> None:
    generator = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
    discriminator = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=1e-3)
    bce = nn.BCEWithLogitsLoss()
    ones, zeros = torch.ones(batch, 1), torch.zeros(batch, 1)

    for step in range(steps):
        fake = generator(torch.randn(batch, 8))

        opt_d.zero_grad()
        d_loss = bce(discriminator(ring(batch)), ones) + bce(discriminator(fake), zeros)
        d_loss.backward()
        opt_d.step()

        opt_g.zero_grad()
        g_loss = bce(discriminator(fake), ones)
        g_loss.backward()  # planted: TD103
        opt_g.step()
        if step % 10 == 0:
            print(f"step {step}: d_loss {d_loss.item():.3f} g_loss {g_loss.item():.3f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    train()
