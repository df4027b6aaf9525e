"""One package per rule family, one module per rule. Importing this registers every rule."""

from . import api, autograd, data, distributed, evaluation, layout, modules, syntax

__all__ = ["api", "autograd", "data", "distributed", "evaluation", "layout", "modules", "syntax"]
