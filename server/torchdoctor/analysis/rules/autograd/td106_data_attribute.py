"""TD106 data-attribute: A write through `.data` bypasses autograd's check that saved tensors are
unchanged."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ...context import RuleContext
from ...dataflow import flow_of
from ...findings import Edit, Finding, Fix, Severity, Span, rule
from ...training import function_scope, training_of
from ...tree_walk import walk
from ._shared import flat_targets


def _indent_unit(ctx: RuleContext, indent: str) -> str:
    return "\t" if "\t" in indent else "    "


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
_DATA = frozenset({"data"})


@rule(
    "TD106",
    "data-attribute",
    Severity.WARNING,
    "A write through `.data` bypasses autograd's check that saved tensors are unchanged.",
    fixable=True,
    # on the ecosystem corpus every finding was a target-network sync or a buffer refill after
    # the graph was freed: a hazard no author acted on (18 of 18 noise)
    enabled_by_default=False,
    # every finding is at an `x.data` attribute written through (`_data_writes`)
    spells=_DATA,
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
    if not sem.mentions(_DATA):
        return  # no `.data` anywhere in the blocks
    for attr, calls in sem.calls_by_attr.items():
        if not attr.endswith("_") or attr.startswith("_") or attr in NOT_WRITES:
            continue
        for call in calls:
            func = call.func
            assert isinstance(func, ast.Attribute)  # calls_by_attr holds attribute calls only
            receiver = func.value
            while isinstance(receiver, ast.Subscript):
                receiver = receiver.value
            if isinstance(receiver, ast.Attribute) and receiver.attr == "data":
                yield call, receiver, "call"
    for assign in sem.assigns:
        targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
        if len(targets) == 1 and type(targets[0]) is ast.Name:
            continue  # `x = ...`, most assignments: no attribute written
        for target in flat_targets(targets):
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
    # the "call" form is a method call on `x.data` (see _data_writes)
    method = (
        node.func.attr
        if form == "call" and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        else None
    )
    if method in INIT_METHODS and any(_iterates_modules(ctx, loop) for loop in loops):
        return False  # `for m in model.modules(): m.weight.data.normal_()`
    return _holds_tensor(ctx, owner, node)


def _mentions_grad_attribute(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "grad" for n in walk(node))


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
        for node in walk(iterable)
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
    for node in walk(scope):
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
    for node in walk(iterable):
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
                for node in walk(definition.value)
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
