"""TD503 workers-options-without-workers: persistent_workers=True or prefetch_factor= with
num_workers=0 raises ValueError."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...call_edits import remove_arguments
from ...context import RuleContext
from ...expressions import is_none
from ...findings import Finding, Fix, Severity, rule
from ...loader_calls import Arguments, loader_calls
from ._shared import int_constant


@rule(
    "TD503",
    "workers-options-without-workers",
    Severity.ERROR,
    "persistent_workers=True or prefetch_factor= with num_workers=0 raises ValueError.",
    fixable=True,
    # every finding is at a `persistent_workers=` or `prefetch_factor=` keyword: neither is
    # among the parameters a DataLoader call can pass by position (LOADER_POSITIONAL)
    spells=("persistent_workers", "prefetch_factor"),
)
def workers_options_without_workers(ctx: RuleContext) -> Iterator[Finding]:
    for call, args in loader_calls(ctx.sem):
        workers = args.get("num_workers")
        if workers is None:
            if not args.unset("num_workers"):
                continue
        elif int_constant(workers) != 0:
            continue
        where = "`num_workers=0`" if workers is not None else "`num_workers` unset (0)"
        persistent = args.get("persistent_workers")
        if persistent is not None and isinstance(persistent, ast.Constant) and persistent.value:
            message = (
                f'`persistent_workers=True` with {where} raises "ValueError: '
                'persistent_workers option needs num_workers > 0"; remove it, or load with '
                "worker processes (`num_workers=<n>`)"
            )
            yield ctx.finding(
                "TD503",
                args.nodes["persistent_workers"],
                message,
                _remove_option_fix(ctx, call, args, "persistent_workers"),
            )
        prefetch = args.get("prefetch_factor")
        if prefetch is not None and isinstance(prefetch, ast.Constant) and not is_none(prefetch):
            message = (
                f'`prefetch_factor=` with {where} raises "ValueError: prefetch_factor option '
                "could only be specified in multiprocessing.let num_workers > 0 to enable "
                'multiprocessing, otherwise set prefetch_factor to None."; remove it, or load '
                "with worker processes (`num_workers=<n>`)"
            )
            yield ctx.finding(
                "TD503",
                args.nodes["prefetch_factor"],
                message,
                _remove_option_fix(ctx, call, args, "prefetch_factor"),
            )


def _remove_option_fix(ctx: RuleContext, call: ast.Call, args: Arguments, name: str) -> Fix | None:
    edits = remove_arguments(ctx, call, [args.nodes[name]])
    if edits is None:
        return None
    return Fix(f"Remove `{name}=` (it only applies to worker processes)", tuple(edits))
