"""TD709 checkpoint-use-reentrant: `torch.utils.checkpoint.checkpoint(...)` without an explicit
`use_reentrant` (torch warns on every call since 2.1)."""

from __future__ import annotations

from collections.abc import Iterator

from ...call_edits import add_keyword
from ...context import RuleContext
from ...findings import Finding, Fix, Severity, called_names, rule
from .call_arguments import has_double_star, keyword_named

CHECKPOINT = ("torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential")


@rule(
    "TD709",
    "checkpoint-use-reentrant",
    Severity.WARNING,
    "`torch.utils.checkpoint.checkpoint(...)` without an explicit `use_reentrant` (torch warns "
    "on every call since 2.1).",
    fixable=True,
    spells=called_names(*CHECKPOINT),
)
def checkpoint_use_reentrant(ctx: RuleContext) -> Iterator[Finding]:
    if ctx.torch_version < (2, 1):
        return
    for call in ctx.sem.calls_to(*CHECKPOINT):
        if keyword_named(call, "use_reentrant") is not None or has_double_star(call):
            continue
        name = (ctx.sem.call_qualname(call) or "checkpoint").rsplit(".", 1)[-1]
        message = (
            f'`{name}()` without `use_reentrant=`: torch warns on every call ("the '
            'use_reentrant parameter should be passed explicitly") and the implicit default '
            "is the reentrant variant, which ignores inputs that do not require grad; pass "
            "`use_reentrant=False` (recommended) or `True`"
        )
        fix = None
        edit = add_keyword(ctx, call, "use_reentrant=False")
        if edit is not None:
            fix = Fix(
                "Add `use_reentrant=False` (the non-reentrant variant: changes behaviour)",
                (edit,),
                safe=False,
            )
        yield ctx.finding("TD709", call.func, message, fix)
