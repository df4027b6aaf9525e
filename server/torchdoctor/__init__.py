"""torchdoctor: find PyTorch pitfalls while you type, and probe models on the local GPU."""

__version__ = "0.1.0"
