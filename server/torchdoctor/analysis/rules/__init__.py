"""One module per rule family; importing this package registers every rule."""

from . import api, autograd, data, distributed, evaluation, layout, modules, syntax

__all__ = ["api", "autograd", "data", "distributed", "evaluation", "layout", "modules", "syntax"]
