"""Autograd rules: gradients that are never zeroed, zeroed at the wrong time, graphs walked twice,
and loss tensors kept alive across iterations."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ..call_edits import add_keyword, remove_arguments
from ..context import RuleContext
from ..dataflow import Definition, ScopeFlow, flow_of, names_with_history
from ..findings import Finding, Fix, Severity, rule
from ..semantics import Function, Loop, Semantics, ValueKind
from ..summaries import computes_loss, in_no_grad, returned_names, summaries_of
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

PAIR_WINDOW = 8  # how many later backward() calls each one is compared with (TD103)


# ---- TD101 ---------------------------------------------------------------------------------
@rule(
    "TD101",
    "missing-zero-grad",
    Severity.WARNING,
    "A training loop calls backward() and step() but never zeroes the gradients.",
    fixable=True,
)
def missing_zero_grad(ctx: RuleContext) -> Iterator[Finding]:
    if ctx.sem.imports_framework_without_torch(OTHER_FRAMEWORKS):
        return
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


# frameworks with the same `loss.backward()` / `trainer.step()` shape whose step overwrites
# the gradients (MXNet's default grad_req="write") or that clear them another way
OTHER_FRAMEWORKS = ("mxnet", "paddle")


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
        or not ctx.is_single_line_statement(zero_statement)
        or not ctx.statement_owns_lines(backward_statement)
    ):
        return None
    text = ctx.doc.source_of(zero_statement)
    return Fix(
        f"Move `{text}` before the `.backward()` call",
        ctx.move_line_before(zero_statement, backward_statement),
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
    # Compare each call with the next few in the same function and loop: a shared graph is
    # reused close by, and this keeps generated files with thousands of calls linear.
    groups: dict[tuple[int, int], list[ast.Call]] = {}
    for call in calls:
        loops = sem.enclosing_loops(call)
        key = (id(sem.enclosing_function(call)), id(loops[0]) if loops else 0)
        groups.setdefault(key, []).append(call)
    sources: dict[int, set[Definition]] = {}
    for group in groups.values():
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
    loops = sem.enclosing_loops(call)
    if receiver is None or not loops:
        return None
    flow = flow_of(sem, function_scope(sem, call))
    definition = flow.reaching(receiver.id, call)
    if definition is None or not _is_computed(definition):
        return None
    if _is_engine_backward(receiver, definition, call) or _used_as_engine(ctx, receiver, call):
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
            receiver = call.func.value  # type: ignore[attr-defined]
            sources[id(call)] = _graph_sources(ctx, flow, receiver, call)
    shared = sources[id(first)] & sources[id(second)]
    if not shared:
        return None  # the common case, decided from cached sets before any tree walking
    if in_exclusive_branches(sem, first, second):
        return None
    first_statement = sem.enclosing_statement(first)
    if first_statement is not None and exits_after(sem, first_statement):
        return None
    for definition in sorted(shared, key=lambda d: d.position):
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
    backward_receivers = _backward_receivers_by_loop(sem, structure.backward_calls)
    for target, value, kind, loop in _accumulations(sem):
        target_name = sem.dotted(target)
        if target_name is None:
            continue
        function = sem.enclosing_function(value)
        if (id(function), target_name) in mentioned_in_backward:
            continue  # the sum or list is back-propagated on purpose
        statement = sem.enclosing_statement(value)
        if statement is None or in_no_grad(sem, statement):
            continue
        if _defined_in_iteration(ctx, target_name, statement, loop):
            continue
        method = "item" if kind == "sum" else "detach"
        losses = [
            n for n in names_with_history(value) if _is_loss(ctx, n, loop, backward_receivers)
        ]
        # asked last: it reads the whole function, and most accumulations are not losses
        if not losses:
            if _is_direct_loss(ctx, value) and not _returned_as_loss(
                ctx, function, target_name, loop
            ):
                yield _direct_loss_finding(ctx, value, target_name, method)
            continue
        if _returned_as_loss(ctx, function, target_name, loop):
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


def _returned_as_loss(
    ctx: RuleContext, function: Function | None, target: str, loop: Loop
) -> bool:
    """A loss function summing its terms (`total += F.mse_loss(a, b)` over feature maps) and
    returning the sum, or a value computed from it: the graph is the loss its caller
    back-propagates, not a leak. Only where the function never back-propagates and the loop
    runs no model (an evaluation loop returning its summed losses still leaks)."""
    sem = ctx.sem
    summary = summaries_of(sem).of(function)
    if function is None or summary is None or summary.calls_backward:
        return False
    if any(
        sem.kind_of(call.func) is ValueKind.MODEL
        for call in training_of(sem).calls_in(loop)
    ):
        return False
    return target in _feeding_returns(ctx, function)


def _feeding_returns(ctx: RuleContext, function: Function) -> set[str]:
    """Names whose values reach a `return` of the function through its assignments."""
    sem = ctx.sem
    cache: dict[int, set[str]] = sem.derived.setdefault("autograd:feeding_returns", {})
    found = cache.get(id(function))
    if found is not None:
        return found
    flow = flow_of(sem, function)
    found = set(returned_names(sem, function))
    pending = list(found)
    while pending:
        name = pending.pop()
        for definition in flow.definitions.get(name, ()):
            if definition.value is None:
                continue
            for source in names_with_history(definition.value):
                if source.id not in found:
                    found.add(source.id)
                    pending.append(source.id)
    cache[id(function)] = found
    return found


def _backward_receivers_by_loop(
    sem: Semantics, backward_calls: list[ast.Call]
) -> set[tuple[int, str]]:
    """(loop, name) for every `name.backward()` and each loop around it: one pass, so that
    asking about one name in one loop costs a set lookup."""
    found: set[tuple[int, str]] = set()
    for call in backward_calls:
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            for loop in sem.enclosing_loops(call):
                found.add((id(loop), func.value.id))
    return found


def _is_direct_loss(ctx: RuleContext, value: ast.AST) -> bool:
    """`total += F.mse_loss(out, y)`: the loss call itself is accumulated (not its `.data`)."""
    return isinstance(value, ast.Call | ast.Attribute) and computes_loss(ctx.sem, value)


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


def _names_in_backward(sem: Semantics, backward_calls: list[ast.Call]) -> set[tuple[int, str]]:
    """(function, name) for the names reaching a backward call in that function
    (`torch.stack(losses).mean().backward()`): a list or sum gathered to be back-propagated."""
    names: set[tuple[int, str]] = set()
    for call in backward_calls:
        owner = id(sem.enclosing_function(call))
        receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
        roots = [receiver, *call.args] if receiver is not None else list(call.args)
        # `accelerator.backward(loss)` takes the loss as an argument; `loss = losses[i]` in a
        # later loop back-propagates what the list kept: follow names to their definitions.
        pending: list[tuple[ast.AST, int]] = [(root, 0) for root in roots]
        flow = None
        while pending:
            root, depth = pending.pop()
            for node in ast.walk(root):
                dotted = sem.dotted(node)
                if dotted is not None:
                    names.add((owner, dotted))
                if depth < 2 and isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                    flow = flow or flow_of(sem, function_scope(sem, call))
                    definition = flow.reaching(node.id, call)
                    if definition is not None and definition.value is not None:
                        pending.append((definition.value, depth + 1))
    return names


def _defined_in_iteration(ctx: RuleContext, name: str, statement: ast.stmt, loop) -> bool:  # type: ignore[no-untyped-def]
    """Reset inside the loop before it is accumulated: it does not outlive the iteration."""
    flow = flow_of(ctx.sem, function_scope(ctx.sem, statement))
    definition = flow.reaching(name, statement)
    return (
        definition is not None
        and not isinstance(definition.node, ast.AugAssign)
        and ctx.sem.in_loop(definition.node, loop)
        and not _is_self_update(ctx, definition, name)
    )


def _is_self_update(ctx: RuleContext, definition: Definition, name: str) -> bool:
    value = definition.value
    return isinstance(value, ast.BinOp) and name in (
        ctx.sem.dotted(value.left),
        ctx.sem.dotted(value.right),
    )


def _is_loss(
    ctx: RuleContext, name: ast.Name, loop: Loop, backward_receivers: set[tuple[int, str]]
) -> bool:
    """A tensor with history: back-propagated in this loop, or computed by a loss function."""
    sem = ctx.sem
    if (id(loop), name.id) in backward_receivers:
        return True
    flow = flow_of(sem, function_scope(sem, name))
    definition = flow.reaching(name.id, name)
    if definition is None or definition.value is None:
        return False
    if in_no_grad(sem, definition.node):
        return False
    if _computed_without_grad(ctx, flow, definition, 0):
        return False
    return computes_loss(sem, definition.value)


def _computed_without_grad(
    ctx: RuleContext, flow: ScopeFlow, definition: Definition, depth: int
) -> bool:
    """Every value this one is computed from was made under no_grad (`outputs = model(x)` in a
    `with torch.no_grad():` block, then `loss = outputs.loss` outside it): it has no graph."""
    value = definition.value
    if value is None or depth > 3:
        return False
    sources = names_with_history(value)
    if not sources or computes_loss(ctx.sem, _without_attribute_reads(value)):
        return False
    for source in sources:
        reaching = flow.reaching(source.id, definition.node)
        if reaching is None or reaching.value is None:
            return False
        if not in_no_grad(ctx.sem, reaching.node) and not _computed_without_grad(
            ctx, flow, reaching, depth + 1
        ):
            return False
    return True


def _without_attribute_reads(value: ast.AST) -> ast.AST:
    """`outputs.loss` → `outputs`: reading a field makes no new graph; a call may."""
    while isinstance(value, ast.Attribute | ast.Subscript):
        value = value.value
    return value


# ==== TD105–TD110 ==========================================================================
# Helpers shared by the rules below; candidates for the core (see each docstring).
import re  # noqa: E402

from ..findings import Edit, Span  # noqa: E402
from ..training import runs_every_iteration, statement_list_of  # noqa: E402


def _statement_in_block(ctx: RuleContext, node: ast.AST, block: list[ast.stmt]) -> ast.stmt | None:
    """The statement of `block` that contains `node` (or is it)."""
    for candidate in (node, *ctx.sem.ancestors(node)):
        if isinstance(candidate, ast.stmt) and any(candidate is s for s in block):
            return candidate
    return None


def _move_after_fix(
    ctx: RuleContext, statement: ast.stmt, target: ast.AST, title: str
) -> Fix | None:
    """Move a one-line statement to just after the statement of its block that holds `target`."""
    block = statement_list_of(ctx.sem, statement)
    if block is None or not ctx.is_single_line_statement(statement):
        return None
    anchor = _statement_in_block(ctx, target, block)
    if anchor is None or anchor is statement or not ctx.statement_owns_lines(anchor):
        return None
    if isinstance(anchor, ast.If | ast.Try | ast.Match):
        return None  # after an `if` the moved call would depend on another condition
    return Fix(title, ctx.move_line_after(statement, anchor))


def _indent_unit(ctx: RuleContext, indent: str) -> str:
    return "\t" if "\t" in indent else "    "


# ---- TD105 ---------------------------------------------------------------------------------
REQUIRES_GRAD = "requires_grad"
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
        for target in _flat_targets(targets):
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


def _flat_targets(targets: list[ast.expr]) -> Iterator[ast.expr]:
    for target in targets:
        if isinstance(target, ast.Tuple | ast.List):
            yield from _flat_targets(list(target.elts))
        elif isinstance(target, ast.Starred):
            yield from _flat_targets([target.value])
        else:
            yield target


def _is_requires_grad_typo(name: str) -> bool:
    if name == REQUIRES_GRAD:
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


# ---- TD106 ---------------------------------------------------------------------------------
INIT_FUNCTION_NAME = re.compile(r"init|reset_param|load", re.IGNORECASE)
INIT_METHODS = frozenset(
    {
        "normal_",
        "uniform_",
        "zero_",
        "fill_",
        "copy_",
        "constant_",
        "bernoulli_",
        "random_",
        "exponential_",
        "log_normal_",
        "geometric_",
        "cauchy_",
    }
)
NOT_WRITES = frozenset({"requires_grad_", "retain_grad", "share_memory_", "record_stream"})
PARAMETER_ATTRIBUTES = ("weight", "bias", "running_mean", "running_var")
PARAMETER_ITERATORS = ("parameters", "named_parameters", "buffers", "named_buffers")


@rule(
    "TD106",
    "data-attribute",
    Severity.WARNING,
    "A write through `.data` bypasses autograd's check that saved tensors are unchanged.",
    fixable=True,
    # on the ecosystem corpus every finding was a target-network sync or a buffer refill after
    # the graph was freed: a hazard no author acted on (18 of 18 noise)
    enabled_by_default=False,
)
def data_attribute(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    seen: set[int] = set()
    for node, data, form in _data_writes(ctx):
        if id(data) in seen or not _reportable_data_write(ctx, node, data, form):
            continue
        seen.add(id(data))
        owner = ctx.doc.source_of(data.value)
        message = (
            f"writing through `{owner}.data` hides the change from autograd: if a graph still "
            f"holds `{owner}`, `backward()` silently uses the new values instead of raising "
            f'"modified by an inplace operation"; write to `{owner}` itself under '
            "`torch.no_grad()`"
        )
        statement = sem.enclosing_statement(node)
        fix = _no_grad_fix(ctx, statement, data, form) if statement is not None else None
        yield ctx.finding("TD106", data, message, fix)


def _data_writes(ctx: RuleContext) -> Iterator[tuple[ast.AST, ast.Attribute, str]]:
    """(node, the `x.data` attribute written through, form) for every write through `.data`."""
    sem = ctx.sem
    for attr, calls in sem.calls_by_attr.items():
        if not attr.endswith("_") or attr.startswith("_") or attr in NOT_WRITES:
            continue
        for call in calls:
            receiver = call.func.value  # type: ignore[attr-defined]
            while isinstance(receiver, ast.Subscript):
                receiver = receiver.value
            if isinstance(receiver, ast.Attribute) and receiver.attr == "data":
                yield call, receiver, "call"
    for assign in sem.assigns:
        targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
        for target in _flat_targets(targets):
            form = "assign"
            while isinstance(target, ast.Subscript):
                target, form = target.value, "setitem"
            if isinstance(target, ast.Attribute) and target.attr == "data":
                if form == "assign" and isinstance(assign, ast.AugAssign):
                    form = "augassign"
                yield assign, target, form


def _reportable_data_write(ctx: RuleContext, node: ast.AST, data: ast.Attribute, form: str) -> bool:
    sem = ctx.sem
    owner = data.value
    if isinstance(owner, ast.Attribute) and owner.attr == "grad":
        return False  # `p.grad.data`: gradients are not saved by the graph being built
    if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
        return False  # a `data` attribute of the user's own class (a Dataset, a buffer holder)
    if sem.in_no_grad(node):
        return False
    function = sem.enclosing_function(node)
    if function is not None and _is_init_function(ctx, function):
        return False
    loops = sem.enclosing_loops(node)
    in_forward = function is not None and function.name == "forward"
    training = {id(loop) for loop in training_of(sem).loops_with_backward()}
    in_training_loop = any(id(loop) in training for loop in loops)
    # Where a graph can be alive: a loop that also runs backward(), or forward() itself; and
    # the hand-written optimizer step (`p.data -= lr * p.grad`). Weight syncs, EMA copies,
    # storage swaps (`p.data = p.data.half()`) and set-up code outside those stay quiet.
    if not (in_training_loop or in_forward or (loops and _mentions_grad_attribute(node))):
        return False
    method = node.func.attr if form == "call" else None  # type: ignore[attr-defined]
    if method in INIT_METHODS and any(_iterates_modules(ctx, loop) for loop in loops):
        return False  # `for m in model.modules(): m.weight.data.normal_()`
    return _holds_tensor(ctx, owner, node)


def _mentions_grad_attribute(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "grad" for n in ast.walk(node))


def _is_init_function(ctx: RuleContext, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    if INIT_FUNCTION_NAME.search(function.name):
        return True
    # `model.apply(weights_fn)`: a function handed to Module.apply initialises weights
    for call in ctx.sem.method_calls("apply"):
        if any(isinstance(arg, ast.Name) and arg.id == function.name for arg in call.args):
            return True
    return False


def _iterates_modules(ctx: RuleContext, loop: ast.AST) -> bool:
    iterable = getattr(loop, "iter", None)
    if iterable is None:
        return False
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("modules", "named_modules", "children", "named_children")
        for node in ast.walk(iterable)
    )


def _holds_tensor(ctx: RuleContext, owner: ast.AST, at: ast.AST) -> bool:
    """`owner` (of `owner.data`) is a parameter or tensor, as far as the file shows."""
    sem = ctx.sem
    if isinstance(owner, ast.Attribute):
        return owner.attr in PARAMETER_ATTRIBUTES or owner.attr.endswith(("_weight", "_bias"))
    if not isinstance(owner, ast.Name):
        return False
    scope = function_scope(sem, at)
    definition = flow_of(sem, scope).reaching(owner.id, at)
    if definition is not None and isinstance(definition.node, ast.For | ast.AsyncFor):
        return _iterates_parameters(ctx, definition.node.iter, definition.node)
    if definition is not None and definition.value is not None:
        value = definition.value
        if isinstance(value, ast.Call):
            qualname = sem.call_qualname(value) or ""
            if qualname.startswith("torch.") and (
                not qualname.startswith("torch.nn.") or qualname == "torch.nn.Parameter"
            ):
                return True
            if isinstance(value.func, ast.Attribute) and value.func.attr in (
                "clone",
                "detach",
                "requires_grad_",
                "to",
                "cuda",
                "float",
                "new_zeros",
                "new_tensor",
                "zeros_like",
            ):
                return True
    # `x.grad` read in the same function: a tensor that takes part in autograd
    for node in ast.walk(scope):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "grad"
            and isinstance(node.value, ast.Name)
            and node.value.id == owner.id
        ):
            return True
    return False


def _iterates_parameters(ctx: RuleContext, iterable: ast.AST, at: ast.AST) -> bool:
    """`model.parameters()`, `zip(ema.parameters(), model.parameters())`, `group["params"]`,
    or a name bound to one of them."""
    for node in ast.walk(iterable):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in PARAMETER_ITERATORS
        ):
            return True
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and node.slice.value == "params"
        ):
            return True
        if isinstance(node, ast.Name) and "param" in node.id.lower():
            return True
    if isinstance(iterable, ast.Name):
        definition = flow_of(ctx.sem, function_scope(ctx.sem, at)).reaching(iterable.id, at)
        if definition is not None and definition.value is not None and definition.node is not at:
            return any(
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in PARAMETER_ITERATORS
                for node in ast.walk(definition.value)
            )
    return False


def _no_grad_fix(
    ctx: RuleContext, statement: ast.stmt, data: ast.Attribute, form: str
) -> Fix | None:
    """`p.data.mul_(d)` → `with torch.no_grad():` + `p.mul_(d)` (one-line statements only)."""
    alias = ctx.sem.name_bound_to("torch", plain_first=True)
    if alias is None or form == "assign" or not ctx.is_single_line_statement(statement):
        return None  # `x.data = y` rebinds the storage: no mechanical equivalent
    if not isinstance(statement, ast.Expr | ast.Assign | ast.AugAssign):
        return None
    if form == "call" and not (
        isinstance(statement, ast.Expr) and _chain_root_call(statement.value, data)
    ):
        return None  # the in-place call's result is used in a larger expression
    span = ctx.doc.span_of(statement)
    indent = ctx.doc.indentation_of(span.start_line)
    unit = _indent_unit(ctx, indent)
    owner_end = ctx.doc.span_of(data.value)
    data_end = ctx.doc.span_of(data)
    wrap = Edit(
        Span(span.start_line, span.start_col, span.start_line, span.start_col),
        f"with {alias}.no_grad():{ctx.doc.line_break()}{indent}{unit}",
    )
    drop = Edit(
        Span(owner_end.end_line, owner_end.end_col, data_end.end_line, data_end.end_col), ""
    )
    owner = ctx.doc.source_of(data.value)
    return Fix(f"Write to `{owner}` under `{alias}.no_grad()`", (wrap, drop), safe=False)


def _chain_root_call(expr: ast.AST, data: ast.Attribute) -> bool:
    """`p.data.mul_(d).add_(x)`: the statement is a chain of calls starting at `p.data`."""
    node = expr
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
        while isinstance(node, ast.Subscript):
            node = node.value
        if node is data:
            return True
    return False


# ---- TD107 ---------------------------------------------------------------------------------
@rule(
    "TD107",
    "step-before-backward",
    Severity.WARNING,
    "optimizer.step() runs before loss.backward() in the same iteration.",
    fixable=True,
)
def step_before_backward(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for entry in training_of(sem).training_loops:
        for step in entry.step_calls:
            if step.args and "scaler" not in (sem.dotted(step.func.value) or "").lower():  # type: ignore[attr-defined]
                continue  # `optimizer.step(closure)` computes its own gradients
            if not runs_every_iteration(sem, step, entry.loop, inner_loops_conditional=True):
                continue  # `if i % k == 0: opt.step()` at the top of an accumulation loop
            before = [b for b in entry.backward_calls if position(b) < position(step)]
            after = [
                b
                for b in entry.backward_calls
                if position(b) > position(step) and not in_exclusive_branches(sem, b, step)
            ]
            if before or not after:
                continue
            statement = sem.enclosing_statement(step)
            if statement is not None and exits_after(sem, statement):
                continue
            target = step_target_name(step) or "optimizer"
            backward = ctx.doc.source_of(after[0])
            message = (
                f"`{target}.step()` runs before `{backward}` in this iteration: it applies the "
                "gradients left in `.grad` (none after `zero_grad()`, else the previous "
                "batch's), never this batch's; call `step()` after `backward()`"
            )
            fix = None
            if statement is not None and "scaler" not in ctx.doc.source_of(step).lower():
                fix = _move_after_fix(
                    ctx, statement, after[0], f"Move `{target}.step()` after the backward pass"
                )
            yield ctx.finding("TD107", step, message, fix)


# ---- TD108 ---------------------------------------------------------------------------------
TORCH_SCHEDULER_SOURCES = ("torch.optim.lr_scheduler.", "transformers.", "diffusers.optimization.")


@rule(
    "TD108",
    "scheduler-before-optimizer",
    Severity.WARNING,
    "scheduler.step() runs before optimizer.step(): the first learning-rate value is skipped.",
    fixable=True,
)
def scheduler_before_optimizer(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    optimizer_steps = training_of(sem).step_calls
    if not optimizer_steps:
        return
    for call in sem.method_calls("step"):
        receiver = call.func.value  # type: ignore[attr-defined]
        if call.args or call.keywords:
            continue  # `scheduler.step(val_loss)`: ReduceLROnPlateau, or the epoch argument
        if not _is_torch_scheduler(ctx, receiver):
            continue
        later = _optimizer_steps_after(ctx, call, optimizer_steps)
        if not later:
            continue
        name = sem.dotted(receiver) or "scheduler"
        optimizer = step_target_name(later[0]) or "optimizer"
        message = (
            f'`{name}.step()` runs before `{optimizer}.step()`: torch warns "Detected call of '
            '`lr_scheduler.step()` before `optimizer.step()`" and the first learning-rate value '
            f"of the schedule is never used; call `{name}.step()` after `{optimizer}.step()`"
        )
        statement = sem.enclosing_statement(call)
        fix = None
        if statement is not None:
            fix = _move_after_fix(
                ctx, statement, later[0], f"Move `{name}.step()` after `{optimizer}.step()`"
            )
        yield ctx.finding("TD108", call, message, fix)


def _is_torch_scheduler(ctx: RuleContext, receiver: ast.AST) -> bool:
    """A torch LR scheduler (or one built on it), not a custom class with its own `step()`."""
    dotted = ctx.sem.dotted(receiver)
    if dotted is None:
        return False
    values = ctx.sem.assigned_values(dotted)
    if not values:
        # a parameter or attribute set elsewhere, named like a scheduler
        return ctx.sem.kind_of(receiver) is ValueKind.SCHEDULER
    for value in values:
        if not isinstance(value, ast.Call):
            return False
        qualname = ctx.sem.call_qualname(value) or ""
        if not qualname.startswith(TORCH_SCHEDULER_SOURCES) or "ReduceLROnPlateau" in qualname:
            return False
        if qualname.startswith(("transformers.", "diffusers.")) and "schedul" not in qualname:
            return False
    return True


def _optimizer_steps_after(
    ctx: RuleContext, call: ast.Call, optimizer_steps: list[ast.Call]
) -> list[ast.Call]:
    """The optimizer steps later in the same iteration of the innermost loop that holds any,
    when none comes before the scheduler call in that iteration."""
    sem = ctx.sem
    for loop in sem.enclosing_loops(call):
        inside = training_of(sem).steps_in(loop)
        if not inside:
            continue
        if any(position(s) < position(call) for s in inside):
            return []
        return [s for s in inside if not in_exclusive_branches(sem, s, call)]
    return []


# ---- TD109 ---------------------------------------------------------------------------------
@rule(
    "TD109",
    "unscaled-accumulation",
    Severity.INFORMATION,
    "Gradient accumulation over k batches without dividing the loss by k.",
    fixable=True,
)
def unscaled_accumulation(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for entry in training_of(sem).training_loops:
        if len(entry.optimizer_names) != 1 or not entry.zeroing:
            continue
        conditions = [_modulo_condition(ctx, step, entry.loop) for step in entry.step_calls]
        if any(c is None for c in conditions):
            continue  # the optimizer also steps on every iteration
        if not all(_modulo_condition(ctx, zero, entry.loop) for zero in entry.zeroing):
            continue  # gradients are cleared every iteration: nothing accumulates
        if not _scale_matters(ctx, entry):
            continue
        branch, divisor = conditions[0]  # type: ignore[misc]
        for backward in entry.backward_calls:
            if any(backward in _walk_set(c[0]) for c in conditions if c is not None):
                continue
            if sem.enclosing_loops(backward)[:1] != [entry.loop]:
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


def _scale_matters(ctx: RuleContext, entry: TrainingLoop) -> bool:
    """The k-times-larger gradient changes the step: the loop clips gradients (at a norm now k
    times too small), or the optimizer is known and not one that normalises the gradient away
    (SGD). An optimizer of unknown class without clipping: stay quiet."""
    sem = ctx.sem
    for call in training_of(sem).calls_in(entry.loop):
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in CLIPPING_CALLS:
            return True
    optimizer = entry.optimizer_names[0]
    classes = [
        (sem.call_qualname(value) or "").rsplit(".", 1)[-1]
        for value in sem.assigned_values(optimizer)
        if isinstance(value, ast.Call)
    ]
    return bool(classes) and all(
        name[:1].isupper() and name not in SCALE_INVARIANT_OPTIMIZERS for name in classes
    )


def _walk_set(node: ast.AST) -> list[ast.AST]:
    return list(ast.walk(node))


def _modulo_condition(
    ctx: RuleContext, node: ast.AST, loop: ast.AST
) -> tuple[ast.If, ast.expr] | None:
    """The `if ... % k == 0:` between `node` and `loop`, with `k`."""
    for ancestor in ctx.sem.ancestors(node):
        if ancestor is loop:
            return None
        if isinstance(ancestor, ast.If):
            for part in ast.walk(ancestor.test):
                if isinstance(part, ast.BinOp) and isinstance(part.op, ast.Mod):
                    divisor = part.right
                    if isinstance(divisor, ast.Constant) and (
                        not isinstance(divisor.value, int) or divisor.value <= 1
                    ):
                        continue
                    return ancestor, divisor
    return None


def _backward_loss(call: ast.Call) -> ast.expr | None:
    """`loss` in `loss.backward()` and in `scaler.scale(loss).backward()`."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    receiver = func.value
    if isinstance(receiver, ast.Name | ast.Attribute) and "accelerat" in ast.unparse(
        receiver
    ).lower():
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


# ---- TD110 ---------------------------------------------------------------------------------
@rule(
    "TD110",
    "zero-grad-keeps-memory",
    Severity.INFORMATION,
    "`zero_grad(set_to_none=False)` keeps a zero-filled gradient tensor per parameter.",
    fixable=True,
    enabled_by_default=False,
)
def zero_grad_keeps_memory(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.sem.method_calls("zero_grad"):
        argument = _set_to_none_false(call)
        if argument is None:
            continue
        receiver = ctx.doc.source_of(call.func.value)  # type: ignore[attr-defined]
        if ctx.torch_version >= (2, 0):
            message = (
                "`set_to_none=False` fills every `.grad` with zeros and keeps the memory of "
                "one gradient per parameter between steps; the default since torch 2.0 "
                "(`set_to_none=True`) frees it"
            )
            edits = remove_arguments(ctx, call, [argument])
            fix = None
            if edits is not None:
                fix = Fix("Drop `set_to_none=False`", tuple(edits), safe=False)
        else:
            message = (
                "`set_to_none=False` (the default before torch 2.0) keeps a zero-filled "
                "gradient per parameter; `set_to_none=True` frees it"
            )
            value = argument.value if isinstance(argument, ast.keyword) else argument
            fix = Fix("Use `set_to_none=True`", (ctx.replace(value, "True"),), safe=False)
        yield ctx.finding("TD110", call, f"`{receiver}.zero_grad`: {message}", fix)


def _set_to_none_false(call: ast.Call) -> ast.keyword | ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == "set_to_none" and _is_false(keyword.value):
            return keyword
    if call.args and _is_false(call.args[0]):
        return call.args[0]
    return None


def _is_false(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is False
