"""Which DataLoaders train: one that feeds a loop calling backward(), is named or built for
training, or shuffles. One named or built for validation or testing never counts."""

from __future__ import annotations

import ast
import re

from .bindings import assigned_name, assignments_to, names_bound_in, same_binding, scope_of
from .dataflow import flow_of
from .expressions import is_true
from .loader_calls import Arguments
from .semantics import Semantics
from .training import function_scope, training_of
from .tree_walk import walk

EVAL_WORDS = ("val", "valid", "validation", "test", "eval", "dev", "predict", "infer", "calib")

# by id of a `for` loop, the names in its iterable (each at its first Name/Attribute node); and
# by name, the loops whose iterable mentions it, with that node
LoopIndex = tuple[
    dict[int, dict[str, ast.expr]], dict[str, list[tuple[ast.For | ast.AsyncFor, ast.expr]]]
]


def loop_index(sem: Semantics) -> LoopIndex:
    """For every `for` loop, the names in its iterable; and for every name, those loops."""
    sem = sem.whole  # a fact of the file, even for a focused view
    found: LoopIndex | None = sem.derived.get("data:loop_iter_names")
    if found is None:
        by_loop: dict[int, dict[str, ast.expr]] = {}
        by_name: dict[str, list[tuple[ast.For | ast.AsyncFor, ast.expr]]] = {}
        for loop in sem.loops:
            if isinstance(loop, ast.For | ast.AsyncFor):
                names: dict[str, ast.expr] = {}
                for node in walk(loop.iter):
                    if isinstance(node, ast.Name | ast.Attribute):
                        name = sem.dotted(node)
                        if name is not None and name not in names:
                            names[name] = node
                            by_name.setdefault(name, []).append((loop, node))
                by_loop[id(loop)] = names
        found = sem.derived["data:loop_iter_names"] = (by_loop, by_name)
    return found


def loop_mentions(sem: Semantics, loop: ast.AST, dotted: str) -> ast.expr | None:
    """The first Name/Attribute in a `for` loop's iterable that is `dotted` (`loader`,
    `self.train_loader`), from an index built once for all loops."""
    return loop_index(sem)[0].get(id(loop), {}).get(dotted)


NOT_LETTERS = re.compile(r"[^a-z]+")


def words_of(name: str) -> list[str]:
    return [word for word in NOT_LETTERS.split(name.lower()) if word]


def is_eval_name(name: str) -> bool:
    return any(
        word in EVAL_WORDS or word.startswith(("val", "test", "eval")) for word in words_of(name)
    )


def _is_train_name(name: str) -> bool:
    return any(word.startswith("train") for word in words_of(name))


def dataset_value(sem: Semantics, args: Arguments) -> ast.expr | None:
    """The dataset expression, or the value its name was assigned from in this scope."""
    dataset = args.get("dataset")
    if isinstance(dataset, ast.Name | ast.Attribute):
        dotted = sem.dotted(dataset)
        if dotted is not None:
            definition = flow_of(sem, function_scope(sem, args.call)).reaching(dotted, args.call)
            if definition is not None and definition.value is not None:
                return definition.value
            if definition is None and isinstance(dataset, ast.Name):
                return _global_value(sem, dataset.id, args.call) or dataset
    return dataset


def _global_value(sem: Semantics, name: str, at: ast.AST) -> ast.expr | None:
    """The value of a global a function reads without binding it: the one module-level
    assignment to it (several, or none: unknown)."""
    if isinstance(scope_of(sem, at), ast.Module) or name in names_bound_in(sem, scope_of(sem, at)):
        return None
    assigns = [
        assign for assign in assignments_to(sem, name) if isinstance(sem.parent(assign), ast.Module)
    ]
    return assigns[0].value if len(assigns) == 1 else None


def split_of(value: ast.AST | None) -> str | None:
    """ "train"/"eval" from `MNIST(..., train=True)` or `load_dataset(..., split="test")`."""
    if not isinstance(value, ast.Call):
        return None
    for keyword in value.keywords:
        if keyword.arg == "train" and isinstance(keyword.value, ast.Constant):
            return "train" if keyword.value.value is True else "eval"
        if keyword.arg in ("split", "subset", "mode") and isinstance(keyword.value, ast.Constant):
            text = str(keyword.value.value)
            if _is_train_name(text):
                return "train"
            if is_eval_name(text):
                return "eval"
    return None


def loader_names(sem: Semantics, call: ast.Call, args: Arguments) -> list[str]:
    """Names that say what a loader is for: its variable, its dataset, the function making it."""
    names: list[str] = []
    handle = assigned_name(sem, call)
    if handle is not None:
        names.append(handle.rsplit(".", 1)[-1])
    dataset = args.get("dataset")
    if dataset is not None:
        dotted = sem.dotted(dataset)
        if dotted is not None:
            names.append(dotted.rsplit(".", 1)[-1])
    parent = sem.parent(call)
    if isinstance(parent, ast.Return):
        function = sem.enclosing_function(call)
        if function is not None:
            names.append(function.name)
    return names


def feeds_backward(sem: Semantics, call: ast.Call) -> bool:
    """The loader is walked by a loop that calls `.backward()`."""
    handle = assigned_name(sem, call)
    if handle is None:
        return False
    loops = sem.derived.get("data:backward_loops")
    if loops is None:
        loops = sem.derived["data:backward_loops"] = training_of(sem).loops_with_backward()
    for loop in loops:
        if loop_mentions(sem, loop, handle) and same_binding(sem, handle, call, loop):
            return True
    return False


def is_training_loader(sem: Semantics, call: ast.Call, args: Arguments) -> bool:
    """Clearly a training loader: it feeds a backward loop, is named or built for training, or
    shuffles. A loader named or built for validation or testing never counts."""
    names = loader_names(sem, call, args)
    split = split_of(dataset_value(sem, args))
    if split == "eval" or any(is_eval_name(name) for name in names):
        return False
    if feeds_backward(sem, call) or split == "train":
        return True
    if any(_is_train_name(name) for name in names):
        return True
    return is_true(args.get("shuffle"))
