"""TD401 eval-without-no-grad: An evaluation loop (model calls, no backward) outside
torch.no_grad()/inference_mode()."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Edit, Finding, Fix, Severity, Span, rule
from ...function_body import own_nodes
from ...semantics import Function, Loop, Semantics, ValueKind, position
from ...summaries import resolve_call
from ...tree_walk import walk
from ._shared import (
    GRAD_MANAGERS,
    call_sites,
    evaluation_candidates,
    facts_of,
    grad_mode_at,
    is_evaluation_loop,
    is_model_call,
    model_of,
)


def _grad_off_before(ctx: RuleContext, loop: Loop) -> bool:
    """`torch.set_grad_enabled(False)` or frozen parameters earlier in the function or at the
    top level of the file."""
    sem = ctx.sem
    earliest = _grad_off_positions(sem)
    if MODULE_LEVEL in earliest:
        return True
    function = sem.enclosing_function(loop)
    if function is None:
        return False
    first = earliest.get(id(function))
    return first is not None and first < position(loop)


MODULE_LEVEL = 0


def _grad_off_positions(sem: Semantics) -> dict[int, tuple[int, int]]:
    """Per function (by id; MODULE_LEVEL for the top level of the file), where autograd is
    first switched off or parameters frozen: one pass over the calls and assignments."""
    sem = sem.whole  # a fact of the file, even for a focused view
    cached: dict[int, tuple[int, int]] | None = sem.derived.get("evaluation:grad-off")
    if cached is not None:
        return cached
    earliest: dict[int, tuple[int, int]] = {}
    nodes: list[ast.AST] = [
        call
        for call in (
            *sem.calls_to("torch.set_grad_enabled", "torch.autograd.set_grad_enabled"),
            *sem.method_calls("requires_grad_"),
        )
        if _is_false_call(call)
    ]
    nodes.extend(
        assign
        for assign in sem.assigns
        if isinstance(assign, ast.Assign)
        and isinstance(assign.value, ast.Constant)
        and assign.value.value is False
        and any(_is_requires_grad_target(t) for t in assign.targets)
    )
    for node in nodes:
        owner = sem.enclosing_function(node)
        if owner is None:
            if not _inside_class(sem, node):
                earliest[MODULE_LEVEL] = (0, 0)
            continue
        where = position(node)
        if id(owner) not in earliest or where < earliest[id(owner)]:
            earliest[id(owner)] = where
    sem.derived["evaluation:grad-off"] = earliest
    return earliest


def _inside_class(sem: Semantics, node: ast.AST) -> bool:
    return any(isinstance(a, ast.ClassDef) for a in sem.ancestors(node))


def _is_requires_grad_target(target: ast.AST) -> bool:
    return isinstance(target, ast.Attribute) and target.attr == "requires_grad"


def _is_false_call(call: ast.Call) -> bool:
    keywords = (k.value for k in call.keywords if k.arg in ("mode", "requires_grad"))
    values = [*call.args[:1], *keywords]
    return bool(values) and isinstance(values[0], ast.Constant) and values[0].value is False


def _wants_gradients_inside(ctx: RuleContext, loop: Loop) -> bool:
    """Input gradients (saliency, adversarial examples) or a model handed to unknown code."""
    sem = ctx.sem
    for node in own_nodes(loop):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "requires_grad_":
                return True
            if sem.qualname(func) in GRAD_MANAGERS:
                return True  # enable_grad()/set_grad_enabled(...) inside: gradients wanted
            if is_model_call(sem, node):
                continue
            if (
                any(
                    sem.dotted(arg) is not None and sem.kind_of(arg) is ValueKind.MODEL
                    for arg in node.args
                )
                and resolve_call(sem, node) is None
            ):
                return True
        elif isinstance(node, ast.Assign):
            if any(_is_requires_grad_target(t) for t in node.targets):
                return True
    return False


def _function_runs_without_grad(ctx: RuleContext, function: Function, depth: int) -> bool:
    """Every visible caller... any visible call site runs under no_grad (or its caller does)."""
    if depth > 3:
        return False
    facts = facts_of(ctx)
    for call in call_sites(ctx, facts, function):
        if grad_mode_at(ctx.sem, call) is not None:
            return True
        caller = ctx.sem.enclosing_function(call)
        if caller is not None and caller is not function:
            if _function_runs_without_grad(ctx, caller, depth + 1):
                return True
    return False


@rule(
    "TD401",
    "eval-without-no-grad",
    Severity.WARNING,
    "An evaluation loop (model calls, no backward) outside torch.no_grad()/inference_mode().",
    fixable=True,
    # no `spells=`: a finding needs a loop and a model call, and a model is known by its name
    # (`MODEL_NAME`, `*_model`) or by what is assigned to it: no name every finding spells
)
def eval_without_no_grad(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    # a loop's own conditions first: most evaluation loops run under no_grad already, and
    # then whether the loop is one needs no facts of the file
    for candidate in evaluation_candidates(ctx):
        loop = candidate.loop
        # the loop's own grad mode first: its model calls are in its body (not in a function,
        # class or lambda defined there), so the climb from each passes the loop and answers
        # as the loop's does when nothing between them does; most evaluation loops run under a
        # no_grad of their function or of a `with` around them
        if grad_mode_at(sem, loop) is not None:
            continue
        calls = [c for c in candidate.model_calls if grad_mode_at(sem, c) is None]
        if not calls:
            continue
        if _grad_off_before(ctx, loop) or _wants_gradients_inside(ctx, loop):
            continue
        if not is_evaluation_loop(ctx, candidate):
            continue
        function = sem.enclosing_function(loop)
        if function is not None and _function_runs_without_grad(ctx, function, 0):
            continue
        model = sem.dotted(model_of(calls[0])) or "model"
        message = (
            f"`{model}(...)` runs in an evaluation loop (nothing calls backward()) with autograd "
            "on: every forward pass records a graph and keeps the activations a backward pass "
            "would need, so it uses more memory and time, and outputs kept across batches keep "
            "their graphs alive; wrap the loop in `with torch.inference_mode():` (or "
            "`torch.no_grad()`)"
        )
        yield ctx.finding("TD401", calls[0], message, _wrap_in_inference_mode(ctx, loop))


def _wrap_in_inference_mode(ctx: RuleContext, loop: Loop) -> Fix | None:
    doc = ctx.doc
    spelled = ctx.sem.spelling("torch.inference_mode")
    if spelled is None or not ctx.statement_owns_lines(loop):
        return None
    span = doc.span_of(loop)
    body_line = doc.span_of(loop.body[0]).start_line
    if body_line == span.start_line:
        return None
    indent = doc.indentation_of(span.start_line)
    body_indent = doc.indentation_of(body_line)
    if not body_indent.startswith(indent) or len(body_indent) == len(indent):
        return None
    unit = body_indent[len(indent) :]
    for node in walk(loop):
        if isinstance(node, ast.Constant | ast.JoinedStr) and getattr(
            node, "end_lineno", node.lineno
        ) != getattr(node, "lineno", 0):
            return None  # indenting would change a multi-line string
    line_break = doc.line_break()
    edits = [
        Edit(
            Span(span.start_line, 0, span.start_line, 0),
            f"{indent}with {spelled}():{line_break}{unit}",
        )
    ]
    for line in range(span.start_line + 1, span.end_line + 1):
        if doc.index.line(line).strip():
            edits.append(Edit(Span(line, 0, line, 0), unit))
    return Fix(f"Wrap the loop in `with {spelled}():`", tuple(edits), safe=False)
