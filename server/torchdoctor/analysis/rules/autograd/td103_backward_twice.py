"""TD103 backward-twice: A second backward() through a graph that the first one freed."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ...call_edits import add_keyword
from ...context import RuleContext
from ...dataflow import Definition, ScopeFlow, flow_of, names_with_history
from ...findings import Finding, Fix, Severity, rule
from ...semantics import Function, Semantics, ValueKind
from ...training import (
    bound_by_iterations,
    exits_after,
    function_scope,
    in_exclusive_branches,
    training_of,
)

PAIR_WINDOW = 8  # how many later backward() calls each one is compared with (TD103)


@rule(
    "TD103",
    "backward-twice",
    Severity.ERROR,
    "A second backward() through a graph that the first one freed.",
    fixable=True,
    # every finding is at a `<x>.backward(...)` call (`backward_calls` that are attribute calls)
    spells=("backward",),
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
    # Compare each call with the next few in the same function and loop: a shared graph is
    # reused close by, and this keeps generated files with thousands of calls linear.
    groups: dict[tuple[int, int], list[ast.Call]] = {}
    if len(calls) > 1:  # else no pair to compare
        for call in calls:
            loops = sem.enclosing_loops(call)
            # a loop lies in one function (the loops around a call stop at its function):
            # the innermost loop alone tells the group, without the climb to the function
            if loops:
                key = (0, id(loops[0]))
            else:
                key = (id(sem.enclosing_function(call)), 0)
            groups.setdefault(key, []).append(call)
    sources: dict[int, set[Definition]] = {}
    for group in groups.values():
        if len(group) < 2:
            continue  # one backward() in its loop: no pair to compare
        flow = flow_of(sem, function_scope(sem, group[0]))
        for first_index, first in enumerate(group):
            for second in group[first_index + 1 : first_index + 1 + PAIR_WINDOW]:
                if id(second) in reported:
                    continue
                shared = _shared_graph(ctx, flow, first, second, sources)
                if shared is None:
                    continue
                reported.add(id(second))
                message = (
                    f"this `.backward()` goes through `{shared}` again, whose graph the "
                    '`.backward()` above already freed: it raises "Trying to backward '
                    'through the graph a second time"; pass `retain_graph=True` to the first '
                    "call (or compute the second loss from a fresh forward pass)"
                )
                edit = add_keyword(ctx, first, "retain_graph=True")
                fix = None
                if edit is not None:
                    fix = Fix("Add `retain_graph=True` to the first `.backward()`", (edit,))
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
    if receiver is None:
        return None
    loops = sem.enclosing_loops(call)
    if not loops:
        return None
    loop = loops[0]
    # pure tests, the one most calls fail first: the name bound in the loop's iterations (the
    # loss computed in the loop), found without the function's data flow
    if bound_by_iterations(sem, receiver.id, loop):
        return None
    flow = flow_of(sem, function_scope(sem, call))
    definition = flow.reaching(receiver.id, call)
    if definition is None or not _is_computed(definition):
        return None
    if _is_engine_backward(receiver, definition, call):
        return None
    if any(sem.in_loop(d.node, loop) or d.node is loop for d in flow.definitions[receiver.id]):
        return None  # the common case: the loss is computed in the loop
    # pure tests; this one last: the first asks about every call of the file
    if not _has_history(ctx, definition) or _used_as_engine(ctx, receiver, call):
        return None
    message = (
        f"`{receiver.id}` is computed once, before this loop, but `.backward()` runs on every "
        'iteration: the first call frees the graph and the second raises "Trying to backward '
        'through the graph a second time"; compute the loss inside the loop'
    )
    return ctx.finding("TD103", call, message)


ENGINE_NAME = re.compile(r"accelerat|fabric|engine|deepspeed", re.IGNORECASE)
FACTORY_PREFIXES = ("create_", "build_", "make_", "get_", "load_", "init_", "setup_")


def _is_engine_backward(receiver: ast.Name, definition: Definition, call: ast.Call) -> bool:
    """`accelerator.backward(loss)`, `fabric.backward(loss)`, `engine.backward(loss)`: the
    receiver is a training object built once (`Accelerator()`), and the loss is the argument."""
    value = definition.value
    if isinstance(value, ast.Call):
        callee = value.func.attr if isinstance(value.func, ast.Attribute) else None
        if isinstance(value.func, ast.Name):
            callee = value.func.id
        if callee is not None and callee[:1].isupper():
            return True  # an object from a class, not a tensor with a graph
    return bool(call.args) and ENGINE_NAME.search(receiver.id) is not None


def _used_as_engine(ctx: RuleContext, receiver: ast.Name, call: ast.Call) -> bool:
    """The receiver is called (`engine(x)`) or stepped (`engine.step()`) in the same function:
    a training engine (DeepSpeed's `model_engine.backward(loss)`), not a tensor."""
    sem = ctx.sem
    function = sem.enclosing_function(call)
    return receiver.id in _called_or_stepped_names(sem, function)


def _called_or_stepped_names(sem: Semantics, function: Function | None) -> set[str]:
    """Names a function (or the module, for None) calls (`engine(x)`) or steps
    (`engine.step()`): one pass over the file's calls the first time, then a lookup."""
    by_owner: dict[int, set[str]] | None = sem.derived.get("autograd:engine-names")
    if by_owner is None:
        by_owner = sem.derived["autograd:engine-names"] = {}
        for other in sem.calls:
            func = other.func
            if isinstance(func, ast.Name):
                name = func.id
            elif (
                isinstance(func, ast.Attribute)
                and func.attr == "step"
                and isinstance(func.value, ast.Name)
            ):
                name = func.value.id
            else:
                continue
            owner = sem.enclosing_function(other)
            by_owner.setdefault(id(owner) if owner else 0, set()).add(name)
    return by_owner.get(id(function) if function else 0, set())


def _is_computed(definition: Definition) -> bool:
    return isinstance(definition.node, ast.Assign | ast.AnnAssign | ast.AugAssign) and isinstance(
        definition.value, ast.Call | ast.BinOp | ast.UnaryOp | ast.Subscript | ast.Attribute
    )


def _has_history(ctx: RuleContext, definition: Definition) -> bool:
    value = definition.value
    if value is None or ctx.sem.in_no_grad(definition.node):
        return False
    return bool(names_with_history(value)) or isinstance(value, ast.Call)


def _shared_graph(
    ctx: RuleContext,
    flow: ScopeFlow,
    first: ast.Call,
    second: ast.Call,
    sources: dict[int, set[Definition]],
) -> str | None:
    """The value both backward calls reach through autograd history, when its graph is shared."""
    sem = ctx.sem
    for call in (first, second):
        if id(call) not in sources:
            func = call.func
            assert isinstance(func, ast.Attribute)  # backward_twice keeps attribute calls only
            receiver = func.value
            sources[id(call)] = _graph_sources(ctx, flow, receiver, call)
    shared = sources[id(first)] & sources[id(second)]
    if not shared:
        return None  # the common case, decided from cached sets before any tree walking
    if in_exclusive_branches(sem, first, second):
        return None
    first_statement = sem.enclosing_statement(first)
    if first_statement is not None and exits_after(sem, first_statement):
        return None
    # by name too: `out, aux = model(x)` binds both at one position, and a set's order is
    # its members' addresses
    for definition in sorted(shared, key=lambda d: (d.position, d.name)):
        # recomputed between the two calls: the second call uses a fresh graph
        if flow.bindings_between(definition.name, first, second):
            continue
        if _is_forward_output(ctx, definition):
            return definition.name
    return None


def _graph_sources(
    ctx: RuleContext, flow: ScopeFlow, expr: ast.AST, at: ast.AST
) -> set[Definition]:
    """Every definition whose value reaches `expr` with its autograd history."""
    found: set[Definition] = set()
    pending: list[tuple[ast.AST, ast.AST]] = [(expr, at)]
    while pending:
        node, point = pending.pop()
        for name in names_with_history(node):
            definition = flow.reaching(name.id, point)
            if definition is None or definition in found or definition.value is None:
                continue
            if isinstance(definition.node, ast.For | ast.AsyncFor):
                continue  # the batches a loop walks carry no graph of this iteration
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
    dotted = ctx.sem.dotted(value.func)
    last = dotted.rsplit(".", 1)[-1] if dotted is not None else ""
    if last.startswith(FACTORY_PREFIXES):
        return False  # `eva = create_model(...)` builds a model; it has no graph
    if last[:1].isupper() or (dotted is not None and dotted in ctx.sem.module_classes):
        return False  # `netD = Discriminator(ngpu)` constructs a module: no forward, no graph
    if ctx.sem.kind_of(value.func) is ValueKind.MODEL:
        return True
    return dotted is not None and dotted.startswith("self.") and dotted.count(".") == 1
