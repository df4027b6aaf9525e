"""Pure static analysis of PyTorch code: source text in, findings out. Never imports torch."""

from .config import Config, ConfigError, load_config
from .document import Document
from .engine import analyse, check
from .findings import REGISTRY, Edit, Finding, Fix, RuleInfo, Severity, Span
from .incremental import IncrementalAnalyser

__all__ = [
    "REGISTRY",
    "Config",
    "ConfigError",
    "Document",
    "Edit",
    "Finding",
    "Fix",
    "IncrementalAnalyser",
    "RuleInfo",
    "Severity",
    "Span",
    "analyse",
    "check",
    "load_config",
]
