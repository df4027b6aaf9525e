"""The DataLoader calls of a file, with their arguments bound to parameter names as Python binds
them."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .semantics import Semantics

LOADER_CLASSES = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
LOADER_POSITIONAL = (
    "dataset",
    "batch_size",
    "shuffle",
    "sampler",
    "batch_sampler",
    "num_workers",
    "collate_fn",
    "pin_memory",
    "drop_last",
    "timeout",
    "worker_init_fn",
    "multiprocessing_context",
    "generator",
)


@dataclass(frozen=True)
class Arguments:
    """The arguments of one call bound to parameter names, like Python binds them."""

    call: ast.Call
    values: dict[str, ast.expr]
    nodes: dict[str, ast.AST]  # the keyword node, or the positional expression
    positional: frozenset[str]
    open: bool  # `*args` / `**kwargs`: parameters not bound here may still be passed

    def get(self, name: str) -> ast.expr | None:
        return self.values.get(name)

    def bound(self, name: str) -> bool:
        return name in self.values

    def unset(self, name: str) -> bool:
        """Not passed, and no `*args`/`**kwargs` could pass it."""
        return name not in self.values and not self.open


def bind_arguments(call: ast.Call, positional_names: tuple[str, ...]) -> Arguments:
    values: dict[str, ast.expr] = {}
    nodes: dict[str, ast.AST] = {}
    positional: set[str] = set()
    is_open = False
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            is_open = True
            break
        if index < len(positional_names):
            name = positional_names[index]
            values[name] = arg
            nodes[name] = arg
            positional.add(name)
    for keyword in call.keywords:
        if keyword.arg is None:
            is_open = True
            continue
        values[keyword.arg] = keyword.value
        nodes[keyword.arg] = keyword
    return Arguments(call, values, nodes, frozenset(positional), is_open)


def loader_calls(sem: Semantics) -> list[tuple[ast.Call, Arguments]]:
    """Every `torch.utils.data.DataLoader(...)` in the document, under any import alias."""
    found = sem.derived.get("data:loaders")
    if found is None:
        calls = sem.calls_to(*LOADER_CLASSES)
        if sem.whole.one_shot:
            # a file analysed once: no later version would read a memo of the bindings
            found = [(call, bind_arguments(call, LOADER_POSITIONAL)) for call in calls]
        else:
            found = _bound_in_memo(sem, calls)
        sem.derived["data:loaders"] = found
    return found


def _bound_in_memo(sem: Semantics, calls: list[ast.Call]) -> list[tuple[ast.Call, Arguments]]:
    """The calls with their arguments, each call's bound once and kept while its block is."""
    memo = sem.node_memo("data:loader-arguments")
    found = []
    for call in calls:
        entry = memo.get(id(call))
        if entry is None or entry[0] is not call:
            entry = memo[id(call)] = (call, bind_arguments(call, LOADER_POSITIONAL))
        found.append((call, entry[1]))
    return found
