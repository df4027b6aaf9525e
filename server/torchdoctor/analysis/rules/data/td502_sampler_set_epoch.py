"""TD502 sampler-set-epoch: A DistributedSampler whose epoch loop never calls set_epoch(): the
same order every epoch."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...bindings import assigned_name, same_binding
from ...context import RuleContext
from ...expressions import is_true, last_name
from ...findings import Finding, Fix, Severity, called_names, rule
from ...loader_calls import Arguments, bind_arguments, loader_calls
from ...loader_purpose import (
    dataset_value,
    is_eval_name,
    loader_names,
    loop_mentions,
    split_of,
    words_of,
)
from ...semantics import Semantics
from ._shared import calls_passing, iteration_sites

DISTRIBUTED_SAMPLERS = (
    "torch.utils.data.DistributedSampler",
    "torch.utils.data.distributed.DistributedSampler",
)
SAMPLER_POSITIONAL = ("dataset", "num_replicas", "rank", "shuffle", "seed", "drop_last")
# Calls that take a loader without iterating it.
NON_ITERATING_CALLS = frozenset(
    {"len", "print", "isinstance", "hasattr", "getattr", "type", "str", "repr", "id", "vars"}
)


def _is_eval_loader(sem: Semantics, call: ast.Call, args: Arguments) -> bool:
    if split_of(dataset_value(sem, args)) == "eval":
        return True
    return any(is_eval_name(name) for name in loader_names(sem, call, args))


@rule(
    "TD502",
    "sampler-set-epoch",
    Severity.WARNING,
    "A DistributedSampler whose epoch loop never calls set_epoch(): the same order every epoch.",
    fixable=True,
    # every finding is at a DistributedSampler call (`calls_to(*DISTRIBUTED_SAMPLERS)`)
    spells=called_names(*DISTRIBUTED_SAMPLERS),
)
def sampler_set_epoch(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    samplers = sem.calls_to(*DISTRIBUTED_SAMPLERS)
    if not samplers or sem.method_calls("set_epoch"):
        return
    for sampler in samplers:
        args = bind_arguments(sampler, SAMPLER_POSITIONAL)
        shuffle = args.get("shuffle")
        if args.bound("shuffle") and not is_true(shuffle):
            continue  # shuffle=False: the order is meant to stay; a variable: cannot tell
        found = _epoch_loop_of(ctx, sampler)
        if found is None:
            continue
        epoch_loop, loader_handle, sampler_handle = found
        if _epoch_set_by_helper(sem, [loader_handle, sampler_handle]):
            continue
        message = (
            "this DistributedSampler shuffles with the seed `seed + epoch`, and its epoch is "
            "never set: every epoch visits the samples in the same order; call "
            "`sampler.set_epoch(epoch)` at the start of each epoch"
        )
        fix = _set_epoch_fix(ctx, epoch_loop, loader_handle, sampler_handle, sampler)
        yield ctx.finding("TD502", sampler, message, fix)


def _epoch_loop_of(
    ctx: RuleContext, sampler: ast.Call
) -> tuple[ast.For | ast.AsyncFor | ast.While, str, str | None] | None:
    """The loop whose iterations each walk a loader that draws from `sampler`."""
    sem = ctx.sem
    sampler_handle = assigned_name(sem, sampler)
    for call, args in loader_calls(sem):
        value = args.get("sampler")
        if value is None:
            continue
        if value is sampler:
            pass
        elif sampler_handle is None or sem.dotted(value) != sampler_handle:
            continue
        elif not same_binding(sem, sampler_handle, sampler, call):
            continue
        handle = assigned_name(sem, call)
        if handle is None or _prepared_elsewhere(sem, handle) or _is_eval_loader(sem, call, args):
            continue  # the order of an evaluation pass does not matter
        loop = _epoch_loop_around_uses(sem, handle, call)
        if loop is not None:
            return loop, handle, sampler_handle
    return None


def _epoch_set_by_helper(sem: Semantics, handles: list[str | None]) -> bool:
    """`set_sampler_epoch(train_loader, epoch)`: a function named for setting the epoch gets the
    loader or the sampler; what it does is out of sight, and likely `.set_epoch(epoch)`."""
    for handle in handles:
        if handle is None:
            continue
        for call in calls_passing(sem, handle):
            words = words_of(last_name(sem, call.func))
            if "set" in words and any(word.startswith("epoch") for word in words):
                return True
    return False


def _prepared_elsewhere(sem: Semantics, handle: str) -> bool:
    """`accelerator.prepare(loader)`: the wrapper sets the epoch itself."""
    for call in sem.method_calls("prepare"):
        if any(sem.dotted(arg) == handle for arg in call.args):
            return True
    return False


def _epoch_loop_around_uses(
    sem: Semantics, handle: str, bound_at: ast.AST
) -> ast.For | ast.AsyncFor | ast.While | None:
    for site in iteration_sites(sem, handle, bound_at):
        around = sem.enclosing_loops(site.loop if site.loop is not None else site.node)
        if around:
            return around[0]
    # `for epoch in ...: train_one_epoch(model, loader, ...)`
    for call in calls_passing(sem, handle):
        func = call.func
        if isinstance(func, ast.Name) and func.id in NON_ITERATING_CALLS:
            continue
        if not same_binding(sem, handle, bound_at, call):
            continue
        around = sem.enclosing_loops(call)
        if around and not any(loop_mentions(sem, loop, handle) is not None for loop in around):
            return around[0]
    return None


def _set_epoch_fix(
    ctx: RuleContext,
    loop: ast.For | ast.AsyncFor | ast.While,
    loader_handle: str,
    sampler_handle: str | None,
    sampler: ast.Call,
) -> Fix | None:
    if not isinstance(loop, ast.For | ast.AsyncFor) or not isinstance(loop.target, ast.Name):
        return None
    epoch = loop.target.id
    if epoch == "_":
        return None
    first = loop.body[0]
    if first.lineno == loop.lineno:
        return None
    sem = ctx.sem
    if sampler_handle is not None and same_binding(sem, sampler_handle, sampler, loop):
        receiver = sampler_handle
    else:
        receiver = f"{loader_handle}.sampler"
    return Fix(
        f"Call `{receiver}.set_epoch({epoch})` at the start of each epoch",
        (ctx.insert_line_before(first, f"{receiver}.set_epoch({epoch})"),),
    )
