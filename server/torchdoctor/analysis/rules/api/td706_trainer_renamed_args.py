"""TD706 trainer-renamed-args: `TrainingArguments(evaluation_strategy=...)` and other renamed
keywords: current transformers raises TypeError."""

from __future__ import annotations

from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Edit, Finding, Fix, Severity, called_names, rule
from .call_arguments import keyword_name_span
from .symbols import TRAINING_ARGUMENT_CLASSES, TRAINING_ARGUMENT_RENAMES

# the classes in a fixed order, sorted once (every file asks)
_CLASSES_IN_ORDER = tuple(sorted(TRAINING_ARGUMENT_CLASSES))


@rule(
    "TD706",
    "trainer-renamed-args",
    Severity.ERROR,
    "`TrainingArguments(evaluation_strategy=...)` and other renamed keywords: current "
    "transformers raises TypeError.",
    fixable=True,
    spells=called_names(*_CLASSES_IN_ORDER),
)
def trainer_renamed_args(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.sem.calls_to(*_CLASSES_IN_ORDER):
        passed = {keyword.arg for keyword in call.keywords}
        name = (ctx.sem.call_qualname(call) or "TrainingArguments").rsplit(".", 1)[-1]
        for keyword in call.keywords:
            if keyword.arg not in TRAINING_ARGUMENT_RENAMES:
                continue
            new, since = TRAINING_ARGUMENT_RENAMES[keyword.arg]
            message = (
                f"`{keyword.arg}=` was renamed `{new}=`; since transformers {since} "
                f'`{name}(...)` raises "TypeError: ... got an unexpected keyword argument '
                f"'{keyword.arg}'\""
            )
            fix = None
            if new not in passed:
                fix = Fix(f"Rename to `{new}=`", (Edit(keyword_name_span(ctx, keyword), new),))
            yield ctx.finding("TD706", keyword, message, fix)
