"""TD206 repeated-host-to-device: The same CPU tensor copied to the device on every training
step."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...dataflow import flow_of
from ...findings import Finding, Fix, Severity, rule
from ...semantics import Loop
from ...training import bound_by_iterations, function_scope
from ...tree_walk import walk
from ._shared import element_for, is_device_like, step_loop, training_loops

HOST_TENSOR_FACTORIES = (
    "torch.tensor",
    "torch.as_tensor",
    "torch.from_numpy",
    "torch.zeros",
    "torch.ones",
    "torch.full",
    "torch.arange",
    "torch.linspace",
    "torch.eye",
    "torch.randn",
    "torch.rand",
    "torch.empty",
    "torch.FloatTensor",
    "torch.LongTensor",
    "torch.Tensor",
)


@rule(
    "TD206",
    "repeated-host-to-device",
    Severity.INFORMATION,
    "The same CPU tensor copied to the device on every training step.",
    fixable=True,
    # every finding is in a training loop, one around a backward() call (`training_loops`:
    # `.backward()` or `torch.autograd.backward`); without one the check stops first
    spells=("backward",),
)
def repeated_host_to_device(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    if not training_loops(ctx):
        return
    for attr in ("to", "cuda"):
        for call in sem.method_calls(attr):
            # the cheap tests first: the receiver's type and the arguments, then the climb of
            # `step_loop`, then the device test
            receiver = call.func.value  # type: ignore[attr-defined]  # Semantics.method_calls: attribute calls
            receiver_kind = type(receiver)
            if receiver_kind is not ast.Name and receiver_kind is not ast.Call:
                continue  # neither a name nor a factory call: nothing found for it below
            if attr == "to" and not (call.args or call.keywords):
                continue
            loop = step_loop(ctx, call)
            if loop is None:
                continue
            if attr == "to" and call.args and not is_device_like(ctx, call.args[0]):
                continue
            if receiver_kind is ast.Name:
                finding = _invariant_name_move(ctx, call, receiver, loop)
            else:
                finding = _constant_tensor_move(ctx, call, receiver, loop)
            if finding is not None:
                yield finding


def _bound_in_loop(ctx: RuleContext, name: str, loop: Loop) -> bool:
    if bound_by_iterations(ctx.sem, name, loop):
        return True  # most names moved in a loop are its batch: known without the data flow
    flow = flow_of(ctx.sem, function_scope(ctx.sem, loop))
    for definition in flow.definitions.get(name, []):
        node = definition.node
        if node is loop or ctx.sem.in_loop(node, loop):
            return True
    return False


def _arguments_invariant(ctx: RuleContext, call: ast.Call, loop: Loop) -> bool:
    for argument in [*call.args, *(k.value for k in call.keywords)]:
        for node in walk(argument):
            if isinstance(node, ast.Name) and _bound_in_loop(ctx, node.id, loop):
                return False
    return True


def _host_tensor_definition(ctx: RuleContext, name: str, loop: Loop) -> bool:
    """`name` was made on the CPU before the loop: a torch factory without `device=`."""
    sem = ctx.sem
    scope = function_scope(sem, loop)
    definition = flow_of(sem, scope).reaching(name, loop)
    if definition is None and scope is not sem.tree:
        if name in _parameter_names(scope):
            return False
        definition = flow_of(sem, sem.tree).reaching(name, scope)
    if definition is None or not isinstance(definition.node, ast.Assign | ast.AnnAssign):
        return False
    value = element_for(definition.node, name, definition.value) if definition.value else None
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in ("float", "long", "unsqueeze", "view", "reshape", "double", "half")
    ):
        value = value.func.value
    return (
        isinstance(value, ast.Call)
        and sem.call_qualname(value) in HOST_TENSOR_FACTORIES
        and not any(k.arg == "device" for k in value.keywords)
    )


def _parameter_names(scope: ast.AST) -> set[str]:
    if not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
        return set()
    arguments = scope.args
    return {
        a.arg
        for a in [
            *arguments.posonlyargs,
            *arguments.args,
            *arguments.kwonlyargs,
            *(x for x in (arguments.vararg, arguments.kwarg) if x is not None),
        ]
    }


def _invariant_name_move(
    ctx: RuleContext, call: ast.Call, receiver: ast.Name, loop: Loop
) -> Finding | None:
    name = receiver.id
    if _bound_in_loop(ctx, name, loop) or not _host_tensor_definition(ctx, name, loop):
        return None
    text = ctx.doc.source_of(call)
    message = (
        f"`{name}` is made on the CPU before the loop and `{text}` copies it to the device again "
        "on every training step; move it once, before the loop"
    )
    return ctx.finding("TD206", call, message, _hoist_fix(ctx, call, name, loop))


def _hoist_fix(ctx: RuleContext, call: ast.Call, name: str, loop: Loop) -> Fix | None:
    """`w_on_device = w.to(device)` above the loop; every identical move inside uses it."""
    if not _arguments_invariant(ctx, call, loop):
        return None
    new_name = f"{name}_on_device"
    if new_name in ctx.doc.text or not ctx.starts_its_line(loop):
        return None
    text = ctx.doc.source_of(call)
    func = call.func
    assert isinstance(func, ast.Attribute)  # a `.to(...)`/`.cuda()` from Semantics.method_calls
    edits = [ctx.insert_line_before(loop, f"{new_name} = {text}")]
    for other in ctx.sem.method_calls(func.attr):
        if ctx.sem.in_loop(other, loop) and ctx.doc.source_of(other) == text:
            edits.append(ctx.replace(other, new_name))
    return Fix(f"Move `{text}` before the loop", tuple(edits))


def _constant_tensor_move(
    ctx: RuleContext, call: ast.Call, created: ast.Call, loop: Loop
) -> Finding | None:
    """`torch.tensor([1.0, 2.0]).to(device)` inside the loop: the same values every step."""
    qualname = ctx.sem.call_qualname(created)
    if qualname not in CONSTANT_FACTORIES:
        return None  # `torch.randn(...)` makes new values every step
    if any(k.arg == "device" for k in created.keywords):
        return None
    if not created.args or not all(_is_literal(a) for a in created.args):
        return None
    if not all(_is_literal(k.value) or k.arg == "dtype" for k in created.keywords):
        return None
    text = ctx.doc.source_of(call)
    message = (
        f"`{text}` builds the same CPU tensor and copies it to the device on every training "
        "step; create it once, before the loop (or with `device=`)"
    )
    return ctx.finding("TD206", call, message, _move_statement_before_loop(ctx, call, loop))


CONSTANT_FACTORIES = frozenset(
    {
        "torch.tensor",
        "torch.as_tensor",
        "torch.zeros",
        "torch.ones",
        "torch.full",
        "torch.arange",
        "torch.linspace",
        "torch.eye",
        "torch.FloatTensor",
        "torch.LongTensor",
        "torch.Tensor",
    }
)


def _is_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _is_literal(node.operand)
    if isinstance(node, ast.List | ast.Tuple):
        return all(_is_literal(e) for e in node.elts)
    return False


def _move_statement_before_loop(ctx: RuleContext, call: ast.Call, loop: Loop) -> Fix | None:
    statement = ctx.sem.parent(call)
    if not (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and any(statement is s for s in loop.body)
        and ctx.is_single_line_statement(statement)
        and ctx.starts_its_line(loop)
        and _arguments_invariant(ctx, call, loop)
    ):
        return None
    name = statement.targets[0].id
    bindings = [
        d
        for d in flow_of(ctx.sem, function_scope(ctx.sem, loop)).definitions.get(name, [])
        if d.node is loop or ctx.sem.in_loop(d.node, loop)
    ]
    if len(bindings) != 1:
        return None
    return Fix(f"Create `{name}` once, before the loop", ctx.move_line_before(statement, loop))
