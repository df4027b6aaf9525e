"""Train a small MLP classifier on synthetic 28x28 "digits" (no download needed).

Planted pitfalls, found by `torchdoctor check examples/`:
  - the training loop never zeroes the gradients (TD101)
  - the epoch loss is summed as tensors, keeping every graph alive (TD104)
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class MLP(nn.Module):
    def __init__(self, hidden: int = 128) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.Linear(28 * 28, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def synthetic_digits(n: int = 512) -> TensorDataset:
    generator = torch.Generator().manual_seed(0)
    images = torch.rand(n, 1, 28, 28, generator=generator)
    labels = torch.randint(0, 10, (n,), generator=generator)
    return TensorDataset(images, labels)


def main() -> None:
    torch.manual_seed(0)
    model = MLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    criterion = nn.CrossEntropyLoss()
    loader = DataLoader(synthetic_digits(), batch_size=64, shuffle=True, num_workers=2)

    for epoch in range(2):
        total_loss = 0.0
        for images, labels in loader:
            logits = model(images)
            loss = criterion(logits, labels)
            loss.backward()  # planted: TD101
            optimizer.step()
            total_loss += loss  # planted: TD104
        print(f"epoch {epoch}: mean loss {float(total_loss) / len(loader):.4f}")


if __name__ == "__main__":
    main()
