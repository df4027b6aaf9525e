"""TD109 unscaled-accumulation: Gradient accumulation over k batches without dividing the loss by
k."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...dataflow import flow_of
from ...findings import Edit, Finding, Fix, Severity, Span, rule
from ...semantics import Loop
from ...training import function_scope, training_of
from ...tree_walk import walk


@rule(
    "TD109",
    "unscaled-accumulation",
    Severity.INFORMATION,
    "Gradient accumulation over k batches without dividing the loss by k.",
    fixable=True,
    # every finding is at a backward() call of a training loop (`is_backward_call`, or
    # `torch.autograd.backward` called through an attribute or a name imported as it)
    spells=("backward",),
)
def unscaled_accumulation(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    clipping: list[ast.Call] | None = None  # the file's clipping calls, found when first asked
    divisors: dict[int, ast.expr | None] = {}  # see _modulo_condition
    steps_far: dict[str, bool] = {}  # see _scale_matters
    for entry in training_of(sem).training_loops:
        # pure tests, cheapest first: most loops step on every iteration, which the climb from
        # their first step tells
        if not entry.zeroing:
            continue
        conditions: list[tuple[ast.If, ast.expr]] = []
        for step in entry.step_calls:
            condition = _modulo_condition(ctx, step, entry.loop, divisors)
            if condition is None:
                break  # asked no further: this one decides
            conditions.append(condition)
        if len(conditions) < len(entry.step_calls):
            continue  # the optimizer also steps on every iteration
        optimizer_names = entry.optimizer_names
        if len(optimizer_names) != 1:
            continue
        if not all(_modulo_condition(ctx, zero, entry.loop, divisors) for zero in entry.zeroing):
            continue  # gradients are cleared every iteration: nothing accumulates
        if clipping is None:
            clipping = _clipping_calls(ctx)
        if not _scale_matters(ctx, entry.loop, optimizer_names[0], clipping, steps_far):
            continue
        branch, divisor = conditions[0]
        for backward in entry.backward_calls:
            if sem.enclosing_loops(backward)[:1] != [entry.loop]:
                continue
            if _under_any(ctx, backward, [c[0] for c in conditions], entry.loop):
                continue
            loss = _backward_loss(backward)
            if loss is None or _is_scaled(ctx, loss, backward, divisor, depth=0):
                continue
            k = ctx.doc.source_of(divisor)
            message = (
                f"the gradients of `{k}` batches are summed before each step but the loss is "
                f"not divided by `{k}`: the step sees `{k}` times the gradient of one batch "
                f"of the combined size (SGD steps `{k}` times as far; gradient clipping cuts "
                f"at the wrong norm); divide the loss by `{k}`"
            )
            text = ctx.doc.source_of(loss)
            if not isinstance(loss, ast.Name | ast.Attribute | ast.Call | ast.Subscript):
                text = f"({text})"
            replacement = f"{text} / {k}" if _is_call_argument(ctx, loss) else f"({text} / {k})"
            span = ctx.doc.span_of(loss)
            follows = ctx.doc.index.line(span.end_line)[span.end_col : span.end_col + 1]
            if follows in (".", ")", ","):  # end the edit on punctuation, not inside a name
                span = Span(span.start_line, span.start_col, span.end_line, span.end_col + 1)
                replacement += follows
            fix = Fix(f"Divide the loss by `{k}`", (Edit(span, replacement),), safe=False)
            yield ctx.finding("TD109", backward, message, fix)


# Optimizers whose update divides by a running norm of the gradient: a gradient k times larger
# gives the same step (checked with torch: identical trajectories for Adam and AdamW).
SCALE_INVARIANT_OPTIMIZERS = frozenset(
    {"Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad", "Adadelta", "SparseAdam"}
)
CLIPPING_CALLS = ("clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "clip_gradients")


def _clipping_calls(ctx: RuleContext) -> list[ast.Call]:
    """The clipping calls of the file, found by the name they call."""
    sem = ctx.sem
    return [
        call
        for name in CLIPPING_CALLS
        for group in (sem.calls_by_attr, sem.calls_by_name)
        for call in group.get(name, ())
    ]


def _scale_matters(
    ctx: RuleContext,
    loop: Loop,
    optimizer: str,
    clipping: list[ast.Call],
    steps_far: dict[str, bool],
) -> bool:
    """The k-times-larger gradient changes the step: the loop clips gradients (at a norm now k
    times too small), or the optimizer is known and not one that normalises the gradient away
    (SGD). An optimizer of unknown class without clipping: stay quiet. `steps_far` keeps the
    second answer by optimizer name (a fact of the name: loops often share one optimizer)."""
    sem = ctx.sem
    # the clipping calls of the file (`_clipping_calls`), asked whether they run in the loop's
    # iterations (what a loop's calls are); only those on the loop's lines can (a node lies
    # within the lines of every node around it), which spares the others' climbs
    first, last = loop.lineno, loop.end_lineno or loop.lineno
    if any(first <= call.lineno <= last and sem.in_loop(call, loop) for call in clipping):
        return True
    known = steps_far.get(optimizer)
    if known is not None:
        return known
    classes = [
        (sem.call_qualname(value) or "").rsplit(".", 1)[-1]
        for value in sem.assigned_values(optimizer)
        if isinstance(value, ast.Call)
    ]
    found = steps_far[optimizer] = bool(classes) and all(
        name[:1].isupper() and name not in SCALE_INVARIANT_OPTIMIZERS for name in classes
    )
    return found


def _under_any(ctx: RuleContext, node: ast.AST, branches: list[ast.If], loop: Loop) -> bool:
    """`node` lies below one of `branches` (each inside `loop`): found by climbing from the
    node to the loop, not by walking each branch's subtree."""
    for ancestor in ctx.sem.ancestors(node):
        if ancestor is loop:
            return False
        if any(ancestor is branch for branch in branches):
            return True
    return False


def _modulo_condition(
    ctx: RuleContext, node: ast.AST, loop: ast.AST, divisors: dict[int, ast.expr | None]
) -> tuple[ast.If, ast.expr] | None:
    """The `if ... % k == 0:` between `node` and `loop`, with `k`. `divisors` keeps each `if`
    asked about (by id) with its test's `k`, or None: an optimizer step and the zeroing after it
    usually share their `if`, whose test is then read once."""
    # the parents read directly, not through the `ancestors` generator: asked of every step
    # and zeroing of every training loop
    parents = ctx.sem.parents
    ancestor = parents.get(node)
    while ancestor is not None:
        if ancestor is loop:
            return None
        if type(ancestor) is ast.If:  # exact type test: the parser makes no subclasses
            key = id(ancestor)
            if key in divisors:
                divisor = divisors[key]
            else:
                divisor = divisors[key] = _modulo_divisor(ancestor.test)
            if divisor is not None:
                return ancestor, divisor
        ancestor = parents.get(ancestor)
    return None


def _modulo_divisor(test: ast.expr) -> ast.expr | None:
    """The `k` of the first `... % k` in `test` (breadth first), whose `k` is no constant that
    cannot count batches (`% 1`, `% 1.5`); None when there is none."""
    # asked first, without the walk (a tenth of its cost): the usual `step % k == 0` and
    # `step % k`, whose `%` is the first node the walk would meet after the comparison
    usual = test.left if type(test) is ast.Compare else test
    divisor = _batch_count(usual)
    if divisor is not None:
        return divisor
    for part in walk(test):
        divisor = _batch_count(part)
        if divisor is not None:
            return divisor
    return None


def _batch_count(node: ast.AST) -> ast.expr | None:
    """The `k` of `... % k` when it may count batches (no constant below 2)."""
    if type(node) is ast.BinOp and type(node.op) is ast.Mod:
        divisor = node.right
        if type(divisor) is not ast.Constant or (
            isinstance(divisor.value, int) and divisor.value > 1
        ):
            return divisor
    return None


def _backward_loss(call: ast.Call) -> ast.expr | None:
    """`loss` in `loss.backward()` and in `scaler.scale(loss).backward()`."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    receiver = func.value
    if (
        isinstance(receiver, ast.Name | ast.Attribute)
        and "accelerat" in ast.unparse(receiver).lower()
    ):
        return None  # `accelerator.backward(loss)` divides by the accumulation steps itself
    if (
        isinstance(receiver, ast.Name | ast.Attribute)
        and ast.unparse(receiver).endswith("autograd")
        and call.args
    ):
        return call.args[0]  # `torch.autograd.backward(loss)`
    if (
        isinstance(receiver, ast.Call)
        and isinstance(receiver.func, ast.Attribute)
        and receiver.func.attr == "scale"
        and len(receiver.args) == 1
    ):
        return receiver.args[0]
    return receiver


def _whole_names(ctx: RuleContext, expr: ast.AST) -> Iterator[str]:
    """`k`, `args.accum_steps`: the longest dotted names in `expr` (not their `args` roots)."""
    pending = [expr]
    while pending:
        node = pending.pop()
        dotted = ctx.sem.dotted(node) if isinstance(node, ast.Name | ast.Attribute) else None
        if dotted is not None:
            yield dotted
            continue
        pending.extend(ast.iter_child_nodes(node))


def _is_call_argument(ctx: RuleContext, node: ast.AST) -> bool:
    parent = ctx.sem.parent(node)
    return isinstance(parent, ast.Call) and node in parent.args


def _is_scaled(ctx: RuleContext, expr: ast.AST, at: ast.AST, divisor: ast.expr, depth: int) -> bool:
    """The loss reaching `backward()` was divided (or multiplied by something named like k).

    Only the arithmetic spine of the loss is followed (`a + b`, `l * w`, `loss.mean()`, names
    bound to those), not the arguments of the calls that compute it: `criterion(out / t, y)`
    does not scale the loss."""
    if depth >= 6:
        return True  # too far to follow: assume the author scaled it
    divisor_names = set(_whole_names(ctx, divisor))
    flow = flow_of(ctx.sem, function_scope(ctx.sem, at))
    pending = [expr]
    while pending:
        node = pending.pop()
        dotted = ctx.sem.dotted(node) if isinstance(node, ast.Name | ast.Attribute) else None
        if dotted is not None and dotted in divisor_names:
            return True
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Div | ast.FloorDiv):
                return True
            if isinstance(node.op, ast.Add | ast.Sub | ast.Mult):
                pending.extend((node.left, node.right))
        elif isinstance(node, ast.UnaryOp):
            pending.append(node.operand)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("div", "div_", "true_divide", "true_divide_", "divide"):
                return True
            if node.func.attr in SPINE_METHODS:
                pending.append(node.func.value)
        elif isinstance(node, ast.Call) and ctx.sem.call_qualname(node) in (
            "torch.div",
            "torch.true_divide",
            "torch.divide",
        ):
            return True
        elif isinstance(node, ast.Name):
            definition = flow.reaching(node.id, at)
            if definition is None or isinstance(definition.node, ast.For | ast.AsyncFor):
                continue
            if isinstance(definition.node, ast.AugAssign):
                if isinstance(definition.node.op, ast.Div | ast.FloorDiv):
                    return True
                if isinstance(definition.node.op, ast.Mult) and _is_scaled(
                    ctx, definition.node.value, definition.node, divisor, depth + 1
                ):
                    return True
            if definition.value is not None and definition.node is not at:
                if _is_scaled(ctx, definition.value, definition.node, divisor, depth + 1):
                    return True
    return False


SPINE_METHODS = frozenset(
    {
        "mean",
        "sum",
        "float",
        "to",
        "squeeze",
        "view",
        "reshape",
        "clone",
        "contiguous",
        "mul",
        "mul_",
    }
)
