"""Fine-tune the head of a small convolutional network on synthetic images.

Planted pitfall, found by `torchdoctor check examples/`:
  - zero_grad() sits between backward() and step(): every step sees zero gradients (TD102)
"""

import torch
import torch.nn.functional as F
from torch import nn


class ConvNet(nn.Module):
    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(4),
        )
        self.head = nn.Linear(16 * 4 * 4, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def fine_tune(model: ConvNet, steps: int = 20) -> list[float]:
    for parameter in model.features.parameters():
        parameter.requires_grad_(False)
    optimizer = torch.optim.Adam(model.head.parameters(), lr=1e-3)
    history = []
    for _ in range(steps):
        images = torch.randn(16, 3, 32, 32)
        targets = torch.randint(0, 5, (16,))
        loss = F.cross_entropy(model(images), targets)
        loss.backward()
        optimizer.zero_grad()  # planted: TD102
        optimizer.step()
        history.append(loss.item())
    return history


if __name__ == "__main__":
    torch.manual_seed(0)
    losses = fine_tune(ConvNet())
    print(f"first loss {losses[0]:.4f}, last loss {losses[-1]:.4f}")
