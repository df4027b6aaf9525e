"""Source texts the LSP tests open: small training scripts with known pitfalls."""

TRAINING_LOOPS = """import torch
from torch import nn, optim

model = nn.Linear(10, 2)
optimizer = optim.SGD(model.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss()

for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()

for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.zero_grad()
    optimizer.step()

total = 0
losses = []
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    total += loss
    losses.append(loss)
"""

BACKWARD_TWICE = """import torch
from torch import nn, optim

model = nn.Linear(10, 2)
optimizer = optim.SGD(model.parameters(), lr=0.1)

for x, y in loader:
    optimizer.zero_grad()
    out = model(x)
    main_loss = (out - y).pow(2).mean()
    aux_loss = out.abs().mean()
    main_loss.backward()
    aux_loss.backward()
    optimizer.step()
"""

CLEAN = """import torch
from torch import nn, optim

model = nn.Linear(10, 2)
optimizer = optim.SGD(model.parameters(), lr=0.1)

for x, y in loader:
    optimizer.zero_grad()
    loss = (model(x) - y).pow(2).mean()
    loss.backward()
    optimizer.step()
"""

# TD101 on line 9 (0-based) once the loop exists
MISSING_ZERO_GRAD = """import torch
from torch import nn, optim

model = nn.Linear(10, 2)
optimizer = optim.SGD(model.parameters(), lr=0.1)

for x, y in loader:
    loss = (model(x) - y).pow(2).mean()
    loss.backward()
    optimizer.step()
"""
