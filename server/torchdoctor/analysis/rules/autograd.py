"""Autograd rules: gradients that are never zeroed, zeroed at the wrong time, graphs walked twice,
and loss tensors kept alive across iterations."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..context import RuleContext
from ..dataflow import Definition, flow_of, names_with_history
from ..findings import Finding, Fix, Severity, rule
from ..semantics import Loop, Semantics, ValueKind
from ..training import (
    TrainingLoop,
    exits_after,
    function_scope,
    in_exclusive_branches,
    position,
    step_target_name,
    training_of,
    zeroing_receiver,
)

LOSS_FUNCTION_SUFFIXES = ("_loss", "loss", "cross_entropy", "nll_loss", "kl_div", "_entropy")


# ---- TD101 ---------------------------------------------------------------------------------
@rule(
    "TD101",
    "missing-zero-grad",
    Severity.WARNING,
    "A training loop calls backward() and step() but never zeroes the gradients.",
    fixable=True,
)
def missing_zero_grad(ctx: RuleContext) -> Iterator[Finding]:
    for entry in training_of(ctx.sem).training_loops:
        if entry.zeroing or not entry.backward_calls:
            continue
        backward = entry.backward_calls[0]
        optimizer = entry.optimizer_names[0] if entry.optimizer_names else "optimizer"
        message = (
            f"gradients are never zeroed in this loop: every `.backward()` adds to `.grad`, so "
            f"`{optimizer}.step()` applies the sum of all batches so far; call "
            f"`{optimizer}.zero_grad()` once per step"
        )
        yield ctx.finding("TD101", backward, message, _insert_zero_grad_fix(ctx, entry, optimizer))


def _insert_zero_grad_fix(ctx: RuleContext, entry: TrainingLoop, optimizer: str) -> Fix | None:
    first = entry.loop.body[0]
    header_line = entry.loop.lineno - 1
    if ctx.doc.span_of(first).start_line == header_line:
        return None  # `for x in loader: loss.backward()` on one line: no clean place to insert
    return Fix(
        f"Insert `{optimizer}.zero_grad()` at the start of the loop body",
        (ctx.insert_line_before(first, f"{optimizer}.zero_grad()"),),
    )


# ---- TD102 ---------------------------------------------------------------------------------
@rule(
    "TD102",
    "zero-grad-before-step",
    Severity.WARNING,
    "zero_grad() runs between backward() and step(): the step sees zero gradients.",
    fixable=True,
)
def zero_grad_before_step(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for entry in training_of(sem).training_loops:
        events: list[tuple[tuple[int, int], str, ast.AST]] = []
        events += [(position(node), "backward", node) for node in entry.backward_calls]
        events += [(position(node), "zero", node) for node in entry.zeroing]
        events += [(position(node), "step", node) for node in entry.step_calls]
        events.sort(key=lambda event: event[0])
        for index, (_, kind, zero) in enumerate(events):
            if kind != "zero":
                continue
            earlier_backward = [n for _, k, n in events[:index] if k == "backward"]
            if not earlier_backward:
                continue
            step = _next_step_without_backward(events[index + 1 :])
            if step is None or not _zeroes_what_step_applies(ctx, zero, step, entry):
                continue
            statement = sem.enclosing_statement(zero)
            if statement is None or exits_after(sem, statement):
                continue
            if in_exclusive_branches(sem, zero, step):
                continue
            backward = earlier_backward[-1]
            target = step_target_name(step) or "optimizer"
            message = (
                f"gradients are zeroed after `.backward()` and before `{target}.step()`: the "
                "step sees only zeros and the parameters never change; zero them before "
                "`.backward()`"
            )
            yield ctx.finding("TD102", zero, message, _move_before_fix(ctx, zero, backward))


def _next_step_without_backward(
    events: list[tuple[tuple[int, int], str, ast.AST]],
) -> ast.Call | None:
    for _, kind, node in events:
        if kind == "backward":
            return None
        if kind == "step" and isinstance(node, ast.Call):
            return node
    return None


def _zeroes_what_step_applies(
    ctx: RuleContext, zero: ast.AST, step: ast.Call, entry: TrainingLoop
) -> bool:
    receiver = zeroing_receiver(zero)
    target = step_target_name(step)
    if receiver is not None and receiver == target:
        return True
    if receiver is not None and ctx.sem.kinds.get(receiver) is ValueKind.OPTIMIZER:
        return False  # another optimizer's gradients
    # model.zero_grad() / p.grad = None: the same parameters when one optimizer trains them all
    return len(entry.optimizer_names) == 1


def _move_before_fix(ctx: RuleContext, zero: ast.AST, backward: ast.AST) -> Fix | None:
    sem = ctx.sem
    zero_statement = sem.enclosing_statement(zero)
    backward_statement = sem.enclosing_statement(backward)
    if (
        not isinstance(zero_statement, ast.Expr)
        or backward_statement is None
        or not ctx.statement_owns_lines(zero_statement)
        or not ctx.statement_owns_lines(backward_statement)
        or zero_statement.lineno != zero_statement.end_lineno
    ):
        return None
    text = ctx.doc.source_of(zero_statement)
    return Fix(
        f"Move `{text}` before the `.backward()` call",
        (
            ctx.insert_line_before(backward_statement, text),
            ctx.delete_lines_of(zero_statement),
        ),
    )


# ---- TD103 ---------------------------------------------------------------------------------
@rule(
    "TD103",
    "backward-twice",
    Severity.ERROR,
    "A second backward() through a graph that the first one freed.",
    fixable=True,
)
def backward_twice(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    calls = [
        call
        for call in training_of(sem).backward_calls
        if isinstance(call.func, ast.Attribute) and not _retains_graph(call)
    ]
    reported: set[int] = set()
    for call in calls:
        finding = _loss_from_before_the_loop(ctx, call)
        if finding is not None:
            reported.add(id(call))
            yield finding
    for first_index, first in enumerate(calls):
        for second in calls[first_index + 1 :]:
            if id(second) in reported:
                continue
            shared = _shared_graph(ctx, first, second)
            if shared is None:
                continue
            reported.add(id(second))
            message = (
                f"this `.backward()` goes through `{shared}` again, whose graph the "
                '`.backward()` above already freed: it raises "Trying to backward through the '
                'graph a second time"; pass `retain_graph=True` to the first call (or compute '
                "the second loss from a fresh forward pass)"
            )
            fix = Fix(
                "Add `retain_graph=True` to the first `.backward()`",
                (_add_keyword(ctx, first, "retain_graph=True"),),
            )
            yield ctx.finding("TD103", second, message, fix)
            break


def _retains_graph(call: ast.Call) -> bool:
    for keyword in call.keywords:
        if keyword.arg == "retain_graph" and not (
            isinstance(keyword.value, ast.Constant) and not keyword.value.value
        ):
            return True
        if keyword.arg is None:  # **kwargs: cannot tell
            return True
    return len(call.args) >= 2  # backward(gradient, retain_graph)


def _receiver_name(call: ast.Call) -> ast.Name | None:
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.value
    return None


def _loss_from_before_the_loop(ctx: RuleContext, call: ast.Call) -> Finding | None:
    """`loss = ...` computed once, then `loss.backward()` inside a loop: iteration 2 raises."""
    sem = ctx.sem
    receiver = _receiver_name(call)
    loops = sem.enclosing_loops(call)
    if receiver is None or not loops:
        return None
    flow = flow_of(sem, function_scope(sem, call))
    definition = flow.reaching(receiver.id, call)
    if definition is None or not _is_computed(definition):
        return None
    loop = loops[0]
    if any(sem.in_loop(d.node, loop) or d.node is loop for d in flow.definitions[receiver.id]):
        return None
    if not _has_history(ctx, definition):
        return None
    message = (
        f"`{receiver.id}` is computed once, before this loop, but `.backward()` runs on every "
        'iteration: the first call frees the graph and the second raises "Trying to backward '
        'through the graph a second time"; compute the loss inside the loop'
    )
    return ctx.finding("TD103", call, message)


def _is_computed(definition: Definition) -> bool:
    return isinstance(definition.node, ast.Assign | ast.AnnAssign | ast.AugAssign) and isinstance(
        definition.value, ast.Call | ast.BinOp | ast.UnaryOp | ast.Subscript | ast.Attribute
    )


def _has_history(ctx: RuleContext, definition: Definition) -> bool:
    value = definition.value
    if value is None or ctx.sem.in_no_grad(definition.node):
        return False
    return bool(names_with_history(value)) or isinstance(value, ast.Call)


def _shared_graph(ctx: RuleContext, first: ast.Call, second: ast.Call) -> str | None:
    """The value both backward calls reach through autograd history, when its graph is shared."""
    sem = ctx.sem
    if sem.enclosing_function(first) is not sem.enclosing_function(second):
        return None
    if sem.enclosing_loops(first)[:1] != sem.enclosing_loops(second)[:1]:
        return None
    if in_exclusive_branches(sem, first, second):
        return None
    first_statement = sem.enclosing_statement(first)
    if first_statement is not None and exits_after(sem, first_statement):
        return None
    flow = flow_of(sem, function_scope(sem, first))
    first_sources = _graph_sources(ctx, flow, first.func.value, first)  # type: ignore[attr-defined]
    second_sources = _graph_sources(ctx, flow, second.func.value, second)  # type: ignore[attr-defined]
    for definition in first_sources:
        if definition not in second_sources:
            continue
        # recomputed between the two calls: the second call uses a fresh graph
        if flow.bindings_between(definition.name, first, second):
            continue
        if _is_forward_output(ctx, definition):
            return definition.name
    return None


def _graph_sources(ctx: RuleContext, flow, expr: ast.AST, at: ast.AST) -> set[Definition]:  # type: ignore[no-untyped-def]
    """Every definition whose value reaches `expr` with its autograd history."""
    found: set[Definition] = set()
    pending: list[tuple[ast.AST, ast.AST]] = [(expr, at)]
    while pending:
        node, point = pending.pop()
        for name in names_with_history(node):
            definition = flow.reaching(name.id, point)
            if definition is None or definition in found or definition.value is None:
                continue
            found.add(definition)
            pending.append((definition.value, definition.node))
    return found


def _is_forward_output(ctx: RuleContext, definition: Definition) -> bool:
    """Assigned straight from calling a model (`out = model(x)`, `fake = netG(noise)`)."""
    value = definition.value
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        value = value.func.value  # `model(x).view(-1)` → the model call
    if not isinstance(value, ast.Call):
        return False
    if ctx.sem.kind_of(value.func) is ValueKind.MODEL:
        return True
    dotted = ctx.sem.dotted(value.func)
    return dotted is not None and dotted.startswith("self.") and dotted.count(".") == 1


def _add_keyword(ctx: RuleContext, call: ast.Call, keyword: str):  # type: ignore[no-untyped-def]
    """An edit that adds `keyword` as the last argument of `call`."""
    span = ctx.doc.span_of(call)
    closing = ctx.doc.index.line(span.end_line)[: span.end_col].rfind(")")
    from ..findings import Edit, Span

    point = Span(span.end_line, closing, span.end_line, closing)
    separator = ", " if call.args or call.keywords else ""
    return Edit(point, f"{separator}{keyword}")


# ---- TD104 ---------------------------------------------------------------------------------
@rule(
    "TD104",
    "loss-graph-leak",
    Severity.WARNING,
    "A loss tensor accumulated across iterations without .item()/.detach() keeps every graph.",
    fixable=True,
)
def loss_graph_leak(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    structure = training_of(sem)
    mentioned_in_backward = _names_in_backward(sem, structure.backward_calls)
    for target, value, kind, loop in _accumulations(sem):
        target_name = sem.dotted(target)
        if target_name is None or target_name in mentioned_in_backward:
            continue  # the sum or list is back-propagated on purpose
        statement = sem.enclosing_statement(value)
        if statement is None or sem.in_no_grad(statement):
            continue
        if _defined_in_iteration(ctx, target_name, statement, loop):
            continue
        method = "item" if kind == "sum" else "detach"
        losses = [n for n in names_with_history(value) if _is_loss(ctx, n, loop)]
        if not losses:
            if _is_direct_loss(ctx, value):
                yield _direct_loss_finding(ctx, value, target_name, method)
            continue
        names = ", ".join(dict.fromkeys(f"`{n.id}`" for n in losses))
        message = (
            f"{names} keeps its autograd graph when accumulated into `{target_name}`: the "
            "graph of every iteration stays referenced and memory grows each step; "
            f"accumulate `.{method}()`"
        )
        fix = Fix(
            f"Use `{losses[0].id}.{method}()`",
            tuple(ctx.replace(n, f"{n.id}.{method}()") for n in losses),
        )
        yield ctx.finding("TD104", value, message, fix)


def _is_direct_loss(ctx: RuleContext, value: ast.AST) -> bool:
    """`total += F.mse_loss(out, y)`: the loss call itself is accumulated."""
    return isinstance(value, ast.Call | ast.Attribute) and _computes_loss(ctx, value)


def _direct_loss_finding(ctx: RuleContext, value: ast.AST, target: str, method: str) -> Finding:
    message = (
        f"this loss keeps its autograd graph when accumulated into `{target}`: the graph of "
        f"every iteration stays referenced and memory grows each step; accumulate `.{method}()`"
    )
    fix = Fix(
        f"Accumulate `.{method}()`",
        (ctx.replace(value, f"{ctx.doc.source_of(value)}.{method}()"),),
    )
    return ctx.finding("TD104", value, message, fix)


def _accumulations(sem: Semantics) -> list[tuple[ast.AST, ast.AST, str, Loop]]:
    """(target, accumulated value, "sum"|"list", innermost loop) for `t += v`, `t = t + v` and
    `t.append(v)` inside loops."""
    found: list[tuple[ast.AST, ast.AST, str]] = []
    for assign in sem.assigns:
        if isinstance(assign, ast.AugAssign) and isinstance(assign.op, ast.Add):
            found.append((assign.target, assign.value, "sum"))
        elif (
            isinstance(assign, ast.Assign)
            and len(assign.targets) == 1
            and isinstance(assign.value, ast.BinOp)
            and isinstance(assign.value.op, ast.Add)
        ):
            target_name = sem.dotted(assign.targets[0])
            left, right = assign.value.left, assign.value.right
            if target_name is not None and sem.dotted(left) == target_name:
                found.append((assign.targets[0], right, "sum"))
            elif target_name is not None and sem.dotted(right) == target_name:
                found.append((assign.targets[0], left, "sum"))
    for call in sem.method_calls("append"):
        if call.args and isinstance(call.func, ast.Attribute):
            found.append((call.func.value, call.args[0], "list"))
    result = []
    for target, value, kind in found:
        loops = sem.enclosing_loops(value)
        if loops:  # only the innermost loop reports, so one accumulation gives one finding
            result.append((target, value, kind, loops[0]))
    return result


def _names_in_backward(sem: Semantics, backward_calls: list[ast.Call]) -> set[str]:
    """Names reaching a backward call (`torch.stack(losses).mean().backward()`): a list or sum
    gathered to be back-propagated."""
    names: set[str] = set()
    for call in backward_calls:
        receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
        nodes = (
            ast.walk(receiver)
            if receiver is not None
            else (n for a in call.args for n in ast.walk(a))
        )
        for node in nodes:
            dotted = sem.dotted(node)
            if dotted is not None:
                names.add(dotted)
    return names


def _defined_in_iteration(ctx: RuleContext, name: str, statement: ast.stmt, loop) -> bool:  # type: ignore[no-untyped-def]
    """Reset inside the loop before it is accumulated: it does not outlive the iteration."""
    flow = flow_of(ctx.sem, function_scope(ctx.sem, statement))
    definition = flow.reaching(name, statement)
    return (
        definition is not None
        and not isinstance(definition.node, ast.AugAssign)
        and definition.node is not statement
        and ctx.sem.in_loop(definition.node, loop)
        and not _is_self_update(ctx, definition, name)
    )


def _is_self_update(ctx: RuleContext, definition: Definition, name: str) -> bool:
    value = definition.value
    return isinstance(value, ast.BinOp) and name in (
        ctx.sem.dotted(value.left),
        ctx.sem.dotted(value.right),
    )


def _is_loss(ctx: RuleContext, name: ast.Name, loop) -> bool:  # type: ignore[no-untyped-def]
    """A tensor with history: back-propagated in this loop, or computed by a loss function."""
    sem = ctx.sem
    for call in training_of(sem).backward_calls:
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == name.id
            and sem.in_loop(call, loop)
        ):
            return True
    flow = flow_of(sem, function_scope(sem, name))
    definition = flow.reaching(name.id, name)
    if definition is None or definition.value is None or sem.in_no_grad(definition.node):
        return False
    return _computes_loss(ctx, definition.value)


def _computes_loss(ctx: RuleContext, value: ast.AST) -> bool:
    sem = ctx.sem
    for node in ast.walk(value):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("item", "detach", "tolist"):
                return False
            if sem.kind_of(func) is ValueKind.CRITERION:
                return True
            qualname = sem.qualname(func) or ""
            if qualname.startswith("torch.nn.functional.") and qualname.endswith(
                LOSS_FUNCTION_SUFFIXES
            ):
                return True
            dotted = sem.dotted(func) or ""
            if dotted.rsplit(".", 1)[-1] in ("criterion", "loss_fn", "loss_func", "criterion_fn"):
                return True
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "loss"
            and isinstance(node.value, ast.Name)
        ):
            return True  # Hugging Face `outputs.loss`
    return False
