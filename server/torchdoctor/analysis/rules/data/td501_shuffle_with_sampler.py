"""TD501 shuffle-with-sampler: DataLoader(shuffle=True, sampler=...) raises: the sampler already
decides the order."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...call_edits import remove_arguments
from ...context import RuleContext
from ...expressions import is_true
from ...findings import Finding, Fix, Severity, called_names, rule
from ...loader_calls import LOADER_CLASSES, Arguments, loader_calls
from ._shared import Presence, sampler_presence


@rule(
    "TD501",
    "shuffle-with-sampler",
    Severity.ERROR,
    "DataLoader(shuffle=True, sampler=...) raises: the sampler already decides the order.",
    fixable=True,
    # every finding is at a DataLoader call (`loader_calls`)
    spells=called_names(*LOADER_CLASSES),
)
def shuffle_with_sampler(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for call, args in loader_calls(sem):
        sampler = args.get("sampler")
        if sampler is None:
            continue  # asked first: most loaders pass no sampler, and without one nothing clashes
        shuffle = args.get("shuffle")
        if not is_true(shuffle):
            continue
        presence = sampler_presence(sem, sampler, call)
        shuffle_node = args.nodes["shuffle"]
        if presence is Presence.SET:
            message = (
                '`shuffle=True` together with `sampler=` raises "ValueError: sampler option is '
                'mutually exclusive with shuffle": the sampler decides the order (shuffle '
                "inside the sampler, e.g. `RandomSampler` or `DistributedSampler(shuffle=True)`)"
            )
            yield ctx.finding("TD501", shuffle_node, message, _drop_shuffle_fix(ctx, call, args))
        elif presence is Presence.MAYBE and sampler is not None:
            name = ctx.doc.source_of(sampler)
            message = (
                f'`shuffle=True` raises "ValueError: sampler option is mutually exclusive with '
                f'shuffle" whenever `{name}` is not None; shuffle only when there is no '
                f"sampler: `shuffle=({name} is None)`"
            )
            fix = Fix(
                f"Shuffle only when `{name}` is None",
                (ctx.replace(shuffle, f"({name} is None)"),),
            )
            yield ctx.finding("TD501", shuffle_node, message, fix)


def _drop_shuffle_fix(ctx: RuleContext, call: ast.Call, args: Arguments) -> Fix | None:
    if "shuffle" in args.positional:
        return Fix(
            "Pass `False` for shuffle (the sampler decides the order)",
            (ctx.replace(args.values["shuffle"], "False"),),
        )
    edits = remove_arguments(ctx, call, [args.nodes["shuffle"]])
    if edits is None:
        return None
    return Fix("Remove `shuffle=True` (the sampler decides the order)", tuple(edits))
