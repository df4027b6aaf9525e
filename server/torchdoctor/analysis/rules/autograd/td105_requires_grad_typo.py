"""TD105 requires-grad-typo: A misspelt `requires_grad` (`require_grad=`, `x.require_grad =
True`)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Edit, Finding, Fix, Severity, Span, rule
from ...semantics import BlockIndex, Semantics
from ._shared import flat_targets

REQUIRES_GRAD = "requires_grad"
# Every typo (and the right spelling) starts with "req" in some case and has "gr" after it: one
# search of the lowered names passes over the nine files in ten that spell no such name (a
# literal prefix, searched fast; IGNORECASE with a word boundary was 14 times slower).
_TYPO_SHAPE = re.compile(r"req\w*gr")
REQUIRES_GRAD_LOOKALIKES = frozenset(
    {"requires_gradient", "require_gradient", "requires_gradients"}
)
TENSOR_FACTORY_METHODS = frozenset(
    {"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "requires_grad_"}
)


@rule(
    "TD105",
    "requires-grad-typo",
    Severity.WARNING,
    "A misspelt `requires_grad` (`require_grad=`, `x.require_grad = True`).",
    fixable=True,
)
def requires_grad_typo(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    if not _may_spell_a_typo(ctx.doc.text):
        return  # the text spells no `q`: no name can start with "req"
    if not any(sem.per_block("td105:spells-a-typo", _spells_a_typo)):
        return  # no keyword argument or attribute of the blocks visited is spelt like one
    for call in sem.calls:
        typos = [k for k in call.keywords if k.arg and _is_requires_grad_typo(k.arg)]
        if not typos or not _is_torch_call(ctx, call):
            continue
        has_correct = any(k.arg == REQUIRES_GRAD for k in call.keywords)
        callee = _callee_name(ctx, call)
        for keyword in typos:
            start = ctx.doc.span_of(keyword)
            name_span = Span(
                start.start_line,
                start.start_col,
                start.start_line,
                start.start_col + len(keyword.arg or ""),
            )
            message = (
                f"`{keyword.arg}=` is not an argument of `{callee}`: the call raises TypeError "
                f"(\"got an unexpected keyword argument '{keyword.arg}'\"); the keyword is "
                "`requires_grad=`"
            )
            fix = None
            if not has_correct:
                fix = Fix(
                    f"Rename `{keyword.arg}` to `requires_grad`",
                    (_rename_edit(ctx, name_span, after="="),),
                )
            yield ctx.finding("TD105", name_span, message, fix)
    for assign in sem.assigns:
        targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
        for target in flat_targets(targets):
            if not isinstance(target, ast.Attribute) or not _is_requires_grad_typo(target.attr):
                continue
            if isinstance(target.value, ast.Name) and target.value.id in ("self", "cls"):
                continue  # an attribute of the user's own class
            span = ctx.doc.span_of(target)
            name_span = Span(
                span.end_line, span.end_col - len(target.attr), span.end_line, span.end_col
            )
            owner = ctx.doc.source_of(target.value)
            message = (
                f"`{owner}.{target.attr} = ...` only creates a new Python attribute that nothing "
                f"reads: `{owner}.requires_grad` is unchanged (a parameter is not frozen, a "
                "tensor is not tracked); the attribute is `requires_grad`"
            )
            fix = Fix(
                f"Rename `{target.attr}` to `requires_grad`",
                (_rename_edit(ctx, name_span, before="."),),
            )
            yield ctx.finding("TD105", name_span, message, fix)


def _may_spell_a_typo(text: str) -> bool:
    """Whether the file's text can spell a typo of `requires_grad` at all: every one starts
    with "req" in some case (`_is_requires_grad_typo`), so a text without `q` or `Q` spells
    none. The names the parser makes are NFKC-normalised (`ｑ` in the text is `q` in the
    tree), so a text that is not all ASCII is always searched by name. Scans in C, the first
    two stopping at their first hit: cheaper than joining the blocks' names, which a text with
    a `q` still needs (`Sequential`, `unsqueeze`, `requires_grad` all spell one)."""
    return "q" in text or "Q" in text or not text.isascii()


def _spells_a_typo(sem: Semantics, block: BlockIndex) -> bool:
    """Some name the block mentions is a typo of `requires_grad`: its names joined and searched
    in C (the set itself, not a generator over the file's names), then tested; kept on the
    block (an edit asks only the blocks it changed)."""
    names = block.identifiers
    if not _TYPO_SHAPE.search(" ".join(names).lower()):
        return False
    return any(_is_requires_grad_typo(name) for name in names)


def _rename_edit(ctx: RuleContext, name: Span, before: str = "", after: str = "") -> Edit:
    """Replace the name in `name` by `requires_grad`, together with the `.` before it or the
    `=` after it on the same line, so the edit never starts or ends inside an identifier."""
    line = ctx.doc.index.line(name.start_line)
    start, end = name.start_col, name.end_col
    if before:
        head = line[:start].rstrip()
        if head.endswith(before):
            start = len(head) - len(before)
    if after:
        tail = line[end:]
        if tail.lstrip().startswith(after):
            end += len(tail) - len(tail.lstrip()) + len(after)
    text = line[start:end].replace(line[name.start_col : name.end_col], REQUIRES_GRAD, 1)
    return Edit(Span(name.start_line, start, name.start_line, end), text)


def _is_requires_grad_typo(name: str) -> bool:
    # every typo starts with "req" in some case: the first letter spares most names the rest
    # (the rule asks this of every keyword argument and identifier of the file)
    if name[:1] not in ("r", "R") or name == REQUIRES_GRAD:
        return False
    lowered = name.lower()
    if lowered in REQUIRES_GRAD_LOOKALIKES:
        return True
    return (
        lowered.startswith("req")
        and "gr" in lowered
        and _edit_distance(lowered, REQUIRES_GRAD) <= 2
    )


def _edit_distance(first: str, second: str) -> int:
    previous = list(range(len(second) + 1))
    for i, a in enumerate(first, start=1):
        current = [i]
        for j, b in enumerate(second, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a != b)))
        previous = current
    return previous[-1]


def _is_torch_call(ctx: RuleContext, call: ast.Call) -> bool:
    qualname = ctx.sem.call_qualname(call)
    if qualname is not None and qualname.startswith("torch."):
        # private APIs spell their own: `torch.Tensor._make_subclass(cls, data, require_grad=)`
        return not any(part.startswith("_") for part in qualname.split("."))
    return isinstance(call.func, ast.Attribute) and call.func.attr in TENSOR_FACTORY_METHODS


def _callee_name(ctx: RuleContext, call: ast.Call) -> str:
    qualname = ctx.sem.call_qualname(call)
    if qualname is not None:
        return qualname
    return ctx.doc.source_of(call.func)
