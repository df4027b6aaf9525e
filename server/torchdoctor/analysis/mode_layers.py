"""What a model contains that behaves differently in train and eval mode (dropout, batch norm,
a branch on `self.training`), from the constructor that built it: a model class of the file,
an `nn.Sequential` of torch layers, a torchvision or transformers constructor.

An empty answer means "nothing known": `model.eval()` changes nothing we can name, so a rule
about eval mode stays quiet.
"""

from __future__ import annotations

import ast
import re

from .semantics import Semantics
from .tree_walk import walk

MODE_LAYER = re.compile(r"Dropout|BatchNorm|^Transformer")
RECURRENT_LAYERS = ("RNN", "LSTM", "GRU", "MultiheadAttention")
CONTAINERS = ("Sequential", "ModuleList", "ModuleDict")
MAX_DEPTH = 6
# torchvision builders by name prefix → the mode-dependent layers their models hold
TORCHVISION_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("resnet", ("BatchNorm2d",)),
    ("resnext", ("BatchNorm2d",)),
    ("wide_resnet", ("BatchNorm2d",)),
    ("regnet", ("BatchNorm2d",)),
    ("densenet", ("BatchNorm2d",)),
    ("shufflenet", ("BatchNorm2d",)),
    ("vgg", ("Dropout",)),
    ("alexnet", ("Dropout",)),
    ("squeezenet", ("Dropout",)),
    ("mobilenet", ("BatchNorm2d", "Dropout")),
    ("efficientnet", ("BatchNorm2d", "Dropout")),
    ("mnasnet", ("BatchNorm2d", "Dropout")),
    ("googlenet", ("BatchNorm2d", "Dropout")),
    ("inception", ("BatchNorm2d", "Dropout")),
)
# transformers classes that are models (configs default to dropout 0.1); `from_pretrained`
# returns a model already switched to eval mode, so it is left out on purpose
TRANSFORMERS_MODEL = re.compile(r"Model|For[A-Z]")


def constructor_mode_layers(sem: Semantics, constructor: ast.Call, depth: int = 0) -> list[str]:
    """The mode-dependent layers of the model `constructor` builds, as far as the file shows."""
    if depth > MAX_DEPTH:
        return []
    qualname = sem.qualname(constructor.func) or ""
    head, _, last = qualname.rpartition(".")
    if head == "torch.nn" or head.startswith("torch.nn.modules"):
        return _torch_layer(sem, last, constructor, depth)
    if qualname.startswith("torchvision.models."):
        return _torchvision_layers(last)
    if qualname.startswith("transformers.") and TRANSFORMERS_MODEL.search(last):
        return ["Dropout"]
    dotted = sem.dotted(constructor.func)
    if dotted is not None and dotted in sem.module_classes:
        cls = _unique_class(sem, dotted)
        return [] if cls is None else class_mode_layers(sem, cls, depth + 1)
    return _dropout_argument(constructor)


# keyword arguments through which model classes of other libraries take a dropout rate
DROPOUT_KEYWORDS = ("dropout", "drop_rate", "dropout_rate", "dropout_prob", "p_dropout")


def _dropout_argument(constructor: ast.Call) -> list[str]:
    """`AttentiveFP(..., dropout=0.2)`: a class of another library asked for dropout."""
    for keyword in constructor.keywords:
        if keyword.arg in DROPOUT_KEYWORDS:
            value = keyword.value
            if isinstance(value, ast.Constant) and not value.value:
                return []
            return [f"dropout (`{keyword.arg}=`)"]
    return []


def _torchvision_layers(builder: str) -> list[str]:
    if builder.startswith("vgg") and builder.endswith("_bn"):
        return ["BatchNorm2d", "Dropout"]
    for prefix, layers in TORCHVISION_LAYERS:
        if builder.startswith(prefix):
            return list(layers)
    return []


def _torch_layer(sem: Semantics, name: str, call: ast.Call, depth: int) -> list[str]:
    if name in CONTAINERS:
        found: list[str] = []
        for argument in call.args:
            for node in walk(argument):
                if isinstance(node, ast.Call):
                    _add(found, constructor_mode_layers(sem, node, depth + 1))
        return found
    if name.startswith("Dropout") or name.endswith("Dropout"):
        return [] if _zero_probability(call) else [name]
    if MODE_LAYER.search(name):
        return [name]
    if name in RECURRENT_LAYERS:
        dropout = next((k.value for k in call.keywords if k.arg == "dropout"), None)
        if dropout is not None and not (isinstance(dropout, ast.Constant) and not dropout.value):
            return [f"{name}(dropout=...)"]
        return []
    if name.startswith("InstanceNorm") and any(
        k.arg == "track_running_stats" for k in call.keywords
    ):
        return [name]
    return []


def _zero_probability(call: ast.Call) -> bool:
    """`nn.Dropout(0.0)`, `nn.Dropout(p=0)`: drops nothing in either mode."""
    values = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "p")]
    return bool(values) and isinstance(values[0], ast.Constant) and values[0].value == 0


def class_mode_layers(sem: Semantics, cls: ast.ClassDef, depth: int = 0) -> list[str]:
    """The mode-dependent layers a model class of the file builds (and its local bases)."""
    sem = sem.whole
    cache: dict[int, list[str]] = sem.derived.setdefault("mode_layers:classes", {})
    if id(cls) in cache:
        return cache[id(cls)]
    cache[id(cls)] = []  # recursion guard
    found: list[str] = []
    for base in cls.bases:
        dotted = sem.dotted(base)
        local = _unique_class(sem, dotted) if dotted is not None else None
        if local is not None and local is not cls and depth <= MAX_DEPTH:
            _add(found, class_mode_layers(sem, local, depth + 1))
    for node in walk(cls):
        if isinstance(node, ast.Attribute) and node.attr == "training":
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                _add(found, ["a branch on `self.training`"])
        elif isinstance(node, ast.Call):
            qualname = sem.qualname(node.func) or ""
            if qualname.startswith("torch.nn.functional.") and (
                "dropout" in qualname or "batch_norm" in qualname
            ):
                _add(found, [f"F.{qualname.rsplit('.', 1)[-1]}"])
            else:
                dotted = sem.dotted(node.func)
                if dotted is not None and _unique_class(sem, dotted) is cls:
                    continue
                _add(found, constructor_mode_layers(sem, node, depth + 1))
    cache[id(cls)] = found
    return found


def _unique_class(sem: Semantics, name: str) -> ast.ClassDef | None:
    if name not in sem.module_classes:
        return None
    sem = sem.whole
    index = sem.derived.get("mode_layers:class_index")
    if index is None:
        index = sem.derived["mode_layers:class_index"] = {}
        for cls in sem.classes:
            index.setdefault(cls.name, []).append(cls)
    matches = index.get(name, [])
    return matches[0] if len(matches) == 1 else None


def _add(found: list[str], more: list[str]) -> None:
    for layer in more:
        if layer not in found:
            found.append(layer)
