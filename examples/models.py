"""Small, realistic models to probe with `torchdoctor probe examples/models.py::SmallCNN`.

Each one runs a forward and backward pass in well under a second on a laptop CPU. None of
them says which input it takes except `TinyTransformer`: the probe works the others out from
the first layer each `forward` uses.
"""

import torch
from torch import nn


class SmallCNN(nn.Module):
    """A CIFAR-style classifier for 32x32 RGB images."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, kernel_size=3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, kernel_size=3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(32 * 8 * 8, 64),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(64, num_classes),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = self.features(images)
        return self.classifier(features)


# torchdoctor: input=(8, 32):int64
class TinyTransformer(nn.Module):
    """A two-layer transformer encoder that classifies token sequences."""

    def __init__(
        self, vocab_size: int = 1000, d_model: int = 64, num_heads: int = 4, num_classes: int = 4
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.position = nn.Parameter(torch.zeros(1, 128, d_model))
        layer = nn.TransformerEncoderLayer(
            d_model, num_heads, dim_feedforward=4 * d_model, dropout=0.1, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position[:, : tokens.shape[1]]
        x = self.encoder(x)
        pooled = self.norm(x).mean(dim=1)
        return self.head(pooled)


class LSTMTagger(nn.Module):
    """Tags every token of a sentence (part-of-speech style) with a bidirectional LSTM."""

    def __init__(
        self, vocab_size: int = 500, embed_dim: int = 32, hidden: int = 64, num_tags: int = 12
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden, batch_first=True, bidirectional=True)
        self.tagger = nn.Linear(2 * hidden, num_tags)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        states, _ = self.lstm(self.embed(tokens))
        return self.tagger(states).log_softmax(dim=-1)
