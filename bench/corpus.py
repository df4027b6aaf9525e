"""A reproducible corpus of realistic PyTorch files: training loops, modules, data pipelines and
evaluation code, of varied sizes, with and without pitfalls. Same seed, same files."""

from __future__ import annotations

import random
from pathlib import Path

HEADER = """\
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
"""

MODULE = """

class Block{n}(nn.Module):
    def __init__(self, channels: int = {c}, dropout: float = 0.1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = nn.BatchNorm2d(channels)
        self.drop = nn.Dropout(dropout)
        self.proj = nn.Linear(channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.norm(self.conv(x)))
        y = self.drop(y)
        pooled = y.mean(dim=(2, 3))
        return x + self.proj(pooled)[:, :, None, None]
"""

DATASET = """

class Records{n}(Dataset):
    def __init__(self, root: str, size: int = {c}) -> None:
        self.root = root
        self.size = size
        self.items = [os.path.join(root, f"{{i}}.pt") for i in range(size)]

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int):
        x = torch.randn(3, 32, 32)
        y = index % 10
        return x, y
"""

TRAIN_OK = """

def train_{n}(model, loader, optimizer, scheduler, device, epochs: int = {c}):
    criterion = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        running = 0.0
        for step, (x, y) in enumerate(loader):
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            logits = model(x)
            loss = criterion(logits, y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            running += loss.item()
            if step % 100 == 0:
                print(f"epoch {{epoch}} step {{step}} loss {{running / (step + 1):.4f}}")
        scheduler.step()
    return running
"""

TRAIN_BUGGY = """

def train_buggy_{n}(model, loader, optimizer, device):
    criterion = nn.CrossEntropyLoss()
    total_loss = 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss
    return total_loss
"""

EVALUATE = """

@torch.no_grad()
def evaluate_{n}(model, loader, device):
    model.eval()
    correct = 0
    seen = 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        pred = model(x).argmax(dim=1)
        correct += (pred == y).sum().item()
        seen += y.numel()
    return correct / max(seen, 1)
"""

ACCUMULATE = """

def accumulate_{n}(model, loader, optimizer, k: int = {c}):
    for i, (x, y) in enumerate(loader):
        loss = F.mse_loss(model(x), y) / k
        loss.backward()
        if (i + 1) % k == 0:
            optimizer.step()
            optimizer.zero_grad()
"""

MAIN = """

def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = Block0().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
    loader = DataLoader(Records0("data"), batch_size=32, shuffle=True, num_workers=4)
    train_0(model, loader, optimizer, scheduler, device)


if __name__ == "__main__":
    main()
"""

PARTS = [MODULE, DATASET, TRAIN_OK, EVALUATE, ACCUMULATE, TRAIN_BUGGY]

BUGGY_MODULE = """

class Head{n}(nn.Module):
    def __init__(self, width: int = {c}) -> None:
        self.proj = nn.Linear(width, width)
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.transpose(1, 2).view(x.size(0), -1)
        return self.drop(self.proj(y))
"""

BUGGY_EVAL = """

def evaluate_buggy_{n}(model, loader):
    correct = 0
    for x, y in loader:
        out = model(x)
        correct += (out.argmax(1) == y).sum()
    return correct
"""

BUGGY_LOADER = """

def loader_{n}(dataset):
    sampler = torch.utils.data.RandomSampler(dataset)
    return DataLoader(dataset, batch_size={c}, shuffle=True, sampler=sampler)
"""

DENSE_PARTS = [BUGGY_MODULE, TRAIN_BUGGY, BUGGY_EVAL, BUGGY_LOADER, BUGGY_MODULE, TRAIN_BUGGY]
# an unfinished block, as a file mid-edit often ends
BROKEN_TAIL = """

def unfinished(model, loader):
    for x, y in loader:
        loss = model(x
"""


def make_file(lines: int, seed: int) -> str:
    """A file of about `lines` lines built from the realistic parts above."""
    rng = random.Random(seed)
    chunks = [HEADER]
    count = HEADER.count("\n")
    n = 0
    while count < lines:
        part = rng.choice(PARTS) if n else MODULE
        if part is TRAIN_BUGGY and rng.random() < 0.6:
            part = TRAIN_OK
        text = part.format(n=n, c=rng.choice([16, 32, 64, 3, 4, 8]))
        chunks.append(text)
        count += text.count("\n")
        n += 1
    if "def train_0(" not in "".join(chunks):
        chunks.append(TRAIN_OK.format(n=0, c=3))
    chunks.append(MAIN)
    return "".join(chunks)


def make_dense_file(lines: int, seed: int, broken_tail: bool = False) -> str:
    """A file of about `lines` lines of models and training functions dense with findings (one
    every six lines or so), optionally ending in a block that does not parse."""
    rng = random.Random(seed)
    chunks = [HEADER]
    count = HEADER.count("\n")
    n = 0
    while count < lines:
        part = rng.choice(DENSE_PARTS)
        text = part.format(n=n, c=rng.choice([16, 32, 64, 8]))
        chunks.append(text)
        count += text.count("\n")
        n += 1
    if broken_tail:
        chunks.append(BROKEN_TAIL)
    return "".join(chunks)


def corpus_texts(files: int, seed: int = 0) -> list[str]:
    """`files` files of varied sizes (28 to 1,950 lines: 40 to 1,500, give or take 30%)."""
    rng = random.Random(seed)
    texts = []
    for index in range(files):
        size = int(rng.choice([40, 80, 150, 300, 600, 1500]) * rng.uniform(0.7, 1.3))
        texts.append(make_file(size, seed * 100_003 + index))
    return texts


def write_corpus(folder: Path, files: int, seed: int = 0) -> list[Path]:
    """Write `corpus_texts(files, seed)` into `folder`, one module each."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for index, text in enumerate(corpus_texts(files, seed)):
        path = folder / f"module_{index:05}.py"
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
