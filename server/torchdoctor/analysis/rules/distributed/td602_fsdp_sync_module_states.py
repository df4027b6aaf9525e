"""TD602 fsdp-sync-module-states: FSDP(...) without sync_module_states=True: each rank shards its
own copy of the weights."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...call_edits import add_keyword
from ...context import RuleContext
from ...expressions import last_name
from ...file_facts import file_fact
from ...findings import Finding, Fix, Severity, called_names, rule
from ...parallel_wrappers import FSDP_CLASSES
from ...semantics import Semantics
from ._shared import mentions_rank


@rule(
    "TD602",
    "fsdp-sync-module-states",
    Severity.INFORMATION,
    "FSDP(...) without sync_module_states=True: each rank shards its own copy of the weights.",
    fixable=True,
    spells=called_names(*FSDP_CLASSES),
)
def fsdp_sync_module_states(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for call in sem.calls_to(*FSDP_CLASSES):
        keywords = {k.arg for k in call.keywords}
        if "sync_module_states" in keywords or None in keywords:
            continue
        if any(isinstance(arg, ast.Starred) for arg in call.args):
            continue
        device_id = next((k.value for k in call.keywords if k.arg == "device_id"), None)
        if _is_cpu(sem, device_id):
            continue  # sync_module_states=True needs the module on the GPU
        deferred = _deferred_init(sem, call)
        if not deferred and (_seeded_alike_fact(ctx) or _loads_weights_fact(ctx)):
            continue  # every rank builds the same weights
        if deferred:
            message = (
                "the module is created on the meta device or loaded on rank 0 only, and FSDP "
                "shards what each rank holds: without `sync_module_states=True` the other ranks "
                "never receive rank 0's weights"
            )
        else:
            message = (
                "FSDP shards the weights each rank built itself and does not broadcast them: "
                "unless every rank creates identical weights (same seed, same checkpoint), the "
                "sharded model mixes different initialisations; `sync_module_states=True` "
                "copies rank 0's parameters and buffers to every rank first"
            )
        fix = None
        if _module_on_gpu(sem, call, device_id):
            edit = add_keyword(ctx, call, "sync_module_states=True")
            if edit is not None:
                fix = Fix("Add `sync_module_states=True`", (edit,), safe=False)
        yield ctx.finding("TD602", call.func, message, fix)


def _is_cpu(sem: Semantics, value: ast.AST | None) -> bool:
    if isinstance(value, ast.Constant):
        return value.value == "cpu"
    if isinstance(value, ast.Call) and sem.qualname(value.func) == "torch.device" and value.args:
        first = value.args[0]
        return isinstance(first, ast.Constant) and first.value == "cpu"
    return False


def _deferred_init(sem: Semantics, call: ast.Call) -> bool:
    """Weights created on the meta device, materialised later, or loaded on rank 0 only."""
    if any(k.arg == "param_init_fn" for k in call.keywords):
        return True
    if sem.method_calls("to_empty") or any(
        last_name(sem, c.func) == "init_empty_weights" for c in sem.calls
    ):
        return True
    for device in sem.calls_to("torch.device"):
        if device.args and isinstance(device.args[0], ast.Constant):
            if device.args[0].value == "meta":
                return True
    for other in sem.calls:
        for keyword in other.keywords:
            if (
                keyword.arg in ("device", "device_map")
                and isinstance(keyword.value, ast.Constant)
                and keyword.value.value == "meta"
            ):
                return True
    return False


SEED_FUNCTIONS = ("manual_seed", "set_seed", "seed_everything")


# Facts of the whole file, read while the rule reports in one block: part of the file's key
# (file_facts.py), so that an edit elsewhere that adds or drops a seed analyses the file again.
@file_fact("distributed:seeded-alike")
def _seeded_alike_fact(ctx: RuleContext) -> bool:
    return _seeded_alike(ctx.sem.whole)


@file_fact("distributed:loads-weights")
def _loads_weights_fact(ctx: RuleContext) -> bool:
    return _loads_weights(ctx.sem.whole)


def _seeded_alike(sem: Semantics) -> bool:
    """A seed call whose seed does not depend on the rank: every rank draws the same weights."""
    for name in SEED_FUNCTIONS:
        for call in (*sem.calls_by_attr.get(name, ()), *sem.calls_by_name.get(name, ())):
            if last_name(sem, call.func) != name:
                continue  # `make().manual_seed(0)`: no name to go by
            if isinstance(call.func, ast.Attribute) and last_name(sem, call.func.value) in (
                "cuda",
                "generator",
            ):
                continue
            arguments = [*call.args, *(k.value for k in call.keywords)]
            if not any(mentions_rank(argument) for argument in arguments):
                return True
    return False


def _loads_weights(sem: Semantics) -> bool:
    """`from_pretrained(...)`, `load_state_dict(...)`: every rank loads the same weights."""
    return bool(sem.method_calls("from_pretrained") or sem.method_calls("load_state_dict"))


def _module_on_gpu(sem: Semantics, call: ast.Call, device_id: ast.AST | None) -> bool:
    if device_id is not None:
        return True
    module = call.args[0] if call.args else None
    if isinstance(module, ast.Call) and isinstance(module.func, ast.Attribute):
        if module.func.attr == "cuda":
            return True
        if module.func.attr == "to" and module.args and not _is_cpu(sem, module.args[0]):
            return True
    return False
