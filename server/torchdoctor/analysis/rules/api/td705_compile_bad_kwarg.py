"""TD705 compile-bad-kwarg: `torch.compile` with a keyword it does not take (e.g.
`dynamic_shapes=`) or an unknown `mode=`: it raises."""

from __future__ import annotations

import ast
import difflib
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Edit, Finding, Fix, Severity, called_names, rule
from .call_arguments import is_constant, keyword_name_span, keyword_named
from .symbols import COMPILE_KEYWORD_FIXES, COMPILE_KEYWORDS, COMPILE_MODES


@rule(
    "TD705",
    "compile-bad-kwarg",
    Severity.ERROR,
    "`torch.compile` with a keyword it does not take (e.g. `dynamic_shapes=`) or an unknown "
    "`mode=`: it raises.",
    fixable=True,
    spells=called_names("torch.compile"),
)
def compile_bad_kwarg(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.sem.calls_to("torch.compile"):
        passed = {keyword.arg for keyword in call.keywords if keyword.arg is not None}
        for keyword in call.keywords:
            if keyword.arg is None or keyword.arg in COMPILE_KEYWORDS:
                continue
            suggestion = COMPILE_KEYWORD_FIXES.get(keyword.arg) or _close_match(
                keyword.arg, sorted(COMPILE_KEYWORDS)
            )
            message = (
                f'`torch.compile()` has no keyword `{keyword.arg}`: it raises "TypeError: '
                f"compile() got an unexpected keyword argument '{keyword.arg}'\""
            )
            fix = None
            if suggestion is not None:
                message += f"; did you mean `{suggestion}=`?"
                if suggestion not in passed:
                    fix = Fix(
                        f"Rename to `{suggestion}=`",
                        (Edit(keyword_name_span(ctx, keyword), suggestion),),
                    )
            yield ctx.finding("TD705", keyword, message, fix)
        mode = keyword_named(call, "mode")
        if mode is not None and isinstance(mode.value, ast.Constant):
            value = mode.value.value
            if isinstance(value, str) and value not in COMPILE_MODES:
                yield _bad_mode(ctx, mode.value, value)
        options = keyword_named(call, "options")
        if (
            mode is not None
            and options is not None
            and not is_constant(mode.value, None)
            and not is_constant(options.value, None)
        ):
            message = (
                "`torch.compile()` takes `mode=` or `options=`, not both: it raises "
                "\"RuntimeError: Either mode or options can be specified, but both can't be "
                'specified at the same time."'
            )
            yield ctx.finding("TD705", options, message, None)


def _bad_mode(ctx: RuleContext, node: ast.Constant, value: str) -> Finding:
    normalised = value.strip().lower().replace("_", "-").replace(" ", "-")
    suggestion = (
        normalised if normalised in COMPILE_MODES else _close_match(normalised, list(COMPILE_MODES))
    )
    modes = ", ".join(COMPILE_MODES)
    message = (
        f'`mode="{value}"` is not a torch.compile mode: it raises "RuntimeError: '
        f'Unrecognized mode={value}, should be one of: {modes}"'
    )
    fix = None
    if suggestion is not None:
        message += f'; did you mean "{suggestion}"?'
        quote = ctx.doc.source_of(node)[:1]
        quote = quote if quote in ("'", '"') else '"'
        fix = Fix(f'Use mode="{suggestion}"', (ctx.replace(node, f"{quote}{suggestion}{quote}"),))
    return ctx.finding("TD705", node, message, fix)


def _close_match(word: str, candidates: list[str]) -> str | None:
    matches = difflib.get_close_matches(word, candidates, n=2, cutoff=0.8)
    return matches[0] if len(matches) == 1 else None
