"""TD104 loss-graph-leak: A loss tensor accumulated across iterations without .item()/.detach()
keeps every graph."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...dataflow import (
    GRAPH_CUTTING_METHODS,
    Definition,
    ScopeFlow,
    flow_of,
    names_with_history,
)
from ...findings import Finding, Fix, Severity, rule
from ...semantics import Function, Loop, Semantics, ValueKind
from ...summaries import (
    computes_loss,
    in_no_grad,
    may_compute_losses,
    returned_names,
    summaries_of,
)
from ...training import function_scope, training_of
from ...tree_walk import walk


@rule(
    "TD104",
    "loss-graph-leak",
    Severity.WARNING,
    "A loss tensor accumulated across iterations without .item()/.detach() keeps every graph.",
    fixable=True,
)
def loss_graph_leak(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    if not sem.loops or not may_compute_losses(sem):
        return  # every finding is the accumulation of a loss, in a loop
    backward = _BackwardFacts(sem)
    for target, value, kind, loop in _accumulations(sem):
        target_name = sem.dotted(target)
        if target_name is None:
            continue
        # pure tests, before any data flow: the climb for no_grad first (an evaluation loop's
        # `seen += y.size(0)`), then whether the value has a name with history or is itself a
        # loss call (`_accumulations` left out the values cut from their graph)
        statement = sem.enclosing_statement(value)
        if statement is None or in_no_grad(sem, statement):
            continue
        sources = names_with_history(value)
        direct: bool | None = None
        if not sources:
            direct = _is_direct_loss(ctx, value)
            if not direct:
                continue
        losses = [n for n in sources if _is_loss(ctx, n, loop, backward)]
        if not losses:
            if direct is None:
                direct = _is_direct_loss(ctx, value)
            if not direct:
                continue
        if _defined_in_iteration(ctx, target_name, statement, loop):
            continue
        function = sem.enclosing_function(value)
        if backward.mentions(function, target_name):
            continue  # the sum or list is back-propagated on purpose
        # asked last: it reads the whole function
        if _returned_as_loss(ctx, function, target_name, loop):
            continue
        method = "item" if kind == "sum" else "detach"
        if not losses:
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


def _returned_as_loss(ctx: RuleContext, function: Function | None, target: str, loop: Loop) -> bool:
    """A loss function summing its terms (`total += F.mse_loss(a, b)` over feature maps) and
    returning the sum, or a value computed from it: the graph is the loss its caller
    back-propagates, not a leak. Only where the function never back-propagates and the loop
    runs no model (an evaluation loop returning its summed losses still leaks)."""
    sem = ctx.sem
    if function is None:
        return False
    if any(sem.kind_of(call.func) is ValueKind.MODEL for call in training_of(sem).calls_in(loop)):
        return False
    # pure tests: the function's own data flow (its accumulations asked for it already)
    # before the file's summaries, which most files then never need
    if target not in _feeding_returns(ctx, function):
        return False
    summary = summaries_of(sem).of(function)
    return summary is not None and not summary.calls_backward


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


# `.item()`, `.detach()`, `.tolist()`: a value cut from its graph, which neither
# `names_with_history` (GRAPH_CUTTING_METHODS) nor `computes_loss` (these three) looks into,
# so that its accumulation is never reported
_CUT_METHODS = GRAPH_CUTTING_METHODS & {"item", "detach", "tolist"}


def _accumulations(sem: Semantics) -> list[tuple[ast.AST, ast.AST, str, Loop]]:
    """(target, accumulated value, "sum"|"list", innermost loop) for `t += v`, `t = t + v` and
    `t.append(v)` inside loops; without those that cannot accumulate a loss: a constant
    (`n += 1`), a value cut from its graph (`t += x.item()`, the most common)."""
    found: list[tuple[ast.AST, ast.AST, str]] = []
    # exact type tests (the parser makes no subclasses), the operator first: asked of every
    # assignment of the file, and most are neither a sum nor an augmented one
    for assign in sem.assigns:
        if type(assign) is ast.AugAssign:
            if type(assign.op) is ast.Add:
                found.append((assign.target, assign.value, "sum"))
            continue
        binop = assign.value
        if type(binop) is not ast.BinOp or type(binop.op) is not ast.Add:
            continue
        if type(assign) is not ast.Assign or len(assign.targets) != 1:
            continue
        total = assign.targets[0]
        total_name = sem.dotted(total)
        if total_name is None:
            continue
        if sem.dotted(binop.left) == total_name:
            found.append((total, binop.right, "sum"))
        elif sem.dotted(binop.right) == total_name:
            found.append((total, binop.left, "sum"))
    for call in sem.method_calls("append"):
        if call.args and isinstance(call.func, ast.Attribute):
            found.append((call.func.value, call.args[0], "list"))
    result: list[tuple[ast.AST, ast.AST, str, Loop]] = []
    for target, value, kind in found:
        if type(value) is ast.Constant:
            continue  # `n += 1`: no name, no loss call
        if type(value) is ast.Call:
            func = value.func
            if type(func) is ast.Attribute and func.attr in _CUT_METHODS:
                continue
        loops = sem.enclosing_loops(value)
        if loops:  # only the innermost loop reports, so one accumulation gives one finding
            result.append((target, value, kind, loops[0]))
    return result


class _BackwardFacts:
    """What the file's backward calls tell about accumulations, each part found when an
    accumulation first asks (most files accumulate no loss, and ask neither):

    - the loops around each `name.backward()`, so that asking whether a name is
      back-propagated in a loop costs a set lookup;
    - the names reaching the backward calls of each function (`torch.stack(losses).mean()
      .backward()`): a list or sum gathered to be back-propagated. Following each backward
      call's names through the data flow costs more than the rest of the rule, and most
      functions accumulate nothing, so this is found per function."""

    def __init__(self, sem: Semantics) -> None:
        self._sem = sem
        self._receivers: set[tuple[int, str]] | None = None
        self._calls: dict[int, list[ast.Call]] | None = None
        self._names: dict[int, set[str]] = {}

    def receives_in(self, loop: Loop, name: str) -> bool:
        """`name.backward()` runs in `loop` (at any depth of its body)."""
        receivers = self._receivers
        if receivers is None:
            receivers = self._receivers = set()
            sem = self._sem
            for call in training_of(sem).backward_calls:
                func = call.func
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                    for around in sem.enclosing_loops(call):
                        receivers.add((id(around), func.value.id))
        return (id(loop), name) in receivers

    def mentions(self, function: Function | None, name: str) -> bool:
        """`name` reaches a backward call of `function`."""
        key = id(function)
        names = self._names.get(key)
        if names is None:
            calls = self._calls
            if calls is None:
                calls = self._calls = {}
                sem = self._sem
                for call in training_of(sem).backward_calls:
                    calls.setdefault(id(sem.enclosing_function(call)), []).append(call)
            names = self._names[key] = _names_in_backward(self._sem, calls.get(key, []))
        return name in names


def _names_in_backward(sem: Semantics, backward_calls: list[ast.Call]) -> set[str]:
    """The names reaching the backward calls of one function."""
    names: set[str] = set()
    for call in backward_calls:
        receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
        roots = [receiver, *call.args] if receiver is not None else list(call.args)
        # `accelerator.backward(loss)` takes the loss as an argument; `loss = losses[i]` in a
        # later loop back-propagates what the list kept: follow names to their definitions.
        pending: list[tuple[ast.AST, int]] = [(root, 0) for root in roots]
        flow = None
        while pending:
            root, depth = pending.pop()
            for node in walk(root):
                dotted = sem.dotted(node)
                if dotted is not None:
                    names.add(dotted)
                if depth < 2 and isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                    flow = flow or flow_of(sem, function_scope(sem, call))
                    definition = flow.reaching(node.id, call)
                    if definition is not None and definition.value is not None:
                        pending.append((definition.value, depth + 1))
    return names


def _defined_in_iteration(ctx: RuleContext, name: str, statement: ast.stmt, loop: Loop) -> bool:
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


def _is_loss(ctx: RuleContext, name: ast.Name, loop: Loop, backward: _BackwardFacts) -> bool:
    """A tensor with history: back-propagated in this loop, or computed by a loss function."""
    sem = ctx.sem
    if backward.receives_in(loop, name.id):
        return True
    flow = flow_of(sem, function_scope(sem, name))
    definition = flow.reaching(name.id, name)
    if definition is None or definition.value is None:
        return False
    # pure conditions: the one most values fail first (most accumulations are no loss)
    if not computes_loss(sem, definition.value):
        return False
    return not in_no_grad(sem, definition.node) and not _computed_without_grad(
        ctx, flow, definition, 0
    )


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
