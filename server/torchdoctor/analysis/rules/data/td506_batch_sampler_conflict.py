"""TD506 batch-sampler-conflict: batch_sampler= together with batch_size, shuffle, sampler or
drop_last raises ValueError."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...call_edits import remove_arguments
from ...context import RuleContext
from ...dataflow import flow_of
from ...findings import Finding, Fix, Severity, called_names, rule
from ...loader_calls import LOADER_CLASSES, LOADER_POSITIONAL, Arguments, loader_calls
from ...semantics import Semantics
from ...training import function_scope
from ._shared import Presence, int_constant, sampler_presence


@rule(
    "TD506",
    "batch-sampler-conflict",
    Severity.ERROR,
    "batch_sampler= together with batch_size, shuffle, sampler or drop_last raises ValueError.",
    fixable=True,
    # every finding is at a DataLoader call (`loader_calls`)
    spells=called_names(*LOADER_CLASSES),
)
def batch_sampler_conflict(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for call, args in loader_calls(sem):
        batch_sampler = args.get("batch_sampler")
        if batch_sampler is None or sampler_presence(sem, batch_sampler, call) is not Presence.SET:
            continue
        conflicts = _batch_sampler_conflicts(sem, call, args)
        if not conflicts:
            continue
        names = ", ".join(f"`{name}`" for name in conflicts)
        message = (
            f'`batch_sampler=` cannot be combined with {names}: DataLoader raises "ValueError: '
            "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
            'drop_last"; the batch sampler alone decides batch size, order and the last batch'
        )
        yield ctx.finding(
            "TD506",
            args.nodes["batch_sampler"],
            message,
            _drop_conflicts_fix(ctx, call, args, conflicts),
        )


def _batch_sampler_conflicts(sem: Semantics, call: ast.Call, args: Arguments) -> list[str]:
    """The arguments that make DataLoader raise next to a batch sampler, as torch tests them:
    `batch_size != 1 or shuffle or sampler is not None or drop_last`."""
    conflicts: list[str] = []
    batch_size = args.get("batch_size")
    if batch_size is not None and (
        (isinstance(batch_size, ast.Constant) and batch_size.value != 1)
        or (
            isinstance(batch_size, ast.Name | ast.Attribute)
            and int_constant(_constant_value(sem, batch_size, call)) != 1
        )
    ):
        conflicts.append("batch_size")
    for flag in ("shuffle", "drop_last"):
        value = args.get(flag)
        if isinstance(value, ast.Constant) and value.value:
            conflicts.append(flag)
    if sampler_presence(sem, args.get("sampler"), call) is Presence.SET:
        conflicts.append("sampler")
    return conflicts


def _constant_value(sem: Semantics, name: ast.AST, at: ast.AST) -> ast.AST | None:
    dotted = sem.dotted(name)
    if dotted is None:
        return None
    definition = flow_of(sem, function_scope(sem, at)).reaching(dotted, at)
    if definition is None or not isinstance(definition.value, ast.Constant):
        return None
    return definition.value


def _drop_conflicts_fix(
    ctx: RuleContext, call: ast.Call, args: Arguments, conflicts: list[str]
) -> Fix | None:
    positional_left = [
        name
        for name in args.positional
        if name not in conflicts
        and LOADER_POSITIONAL.index(name)
        > min((LOADER_POSITIONAL.index(c) for c in conflicts if c in args.positional), default=99)
    ]
    if positional_left:
        return None  # removing a positional argument would shift the ones after it
    edits = remove_arguments(ctx, call, [args.nodes[name] for name in conflicts])
    if edits is None:
        return None
    names = ", ".join(f"`{name}`" for name in conflicts)
    return Fix(f"Remove {names} (the batch sampler decides them)", tuple(edits))
