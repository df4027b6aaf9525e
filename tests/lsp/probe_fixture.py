"""Models the probe tests run through the language server (opened as an unsaved document)."""

import time

import torch
from torch import nn


# torchdoctor: input=(2, 3, 16, 16)
class TinyNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv1(x))
        x = self.pool(x).flatten(1)
        return self.fc(x)


# torchdoctor: input=(2, 4)
class Float64Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wide = x.double() * 2
        return self.fc(wide.float())


# torchdoctor: input=(2, 4)
class BrokenNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x).view(3, 5)


# torchdoctor: input=(2, 4)
class SlowNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(120)
        return self.fc(x)
