"""TD204 device-less-tensor-in-forward: A tensor created in `forward()` without `device=` and
mixed with the inputs."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Edit, Finding, Fix, Severity, Span, called_names, rule
from ...semantics import Function, Semantics, ValueKind
from ...tree_walk import child_nodes, walk
from ._shared import is_tensor_call, used_as_tensor

SIZE_ATTRIBUTES = ("shape", "ndim", "dtype", "device", "is_cuda", "layout")
SIZE_METHODS = ("size", "dim", "numel", "get_device", "element_size", "stride")


CPU_FACTORIES = tuple(
    f"torch.{name}"
    for name in (
        "zeros",
        "ones",
        "empty",
        "full",
        "arange",
        "randn",
        "rand",
        "randint",
        "randperm",
        "eye",
        "linspace",
        "logspace",
        "tensor",
    )
)
MOVING_METHODS_FOR_DEVICE = ("to", "cuda", "type_as", "to_device")
MIXING_FUNCTIONS = (
    "torch.cat",
    "torch.stack",
    "torch.where",
    "torch.matmul",
    "torch.bmm",
    "torch.mm",
    "torch.einsum",
    "torch.maximum",
    "torch.minimum",
    "torch.add",
    "torch.mul",
    "torch.max",
    "torch.min",
    "torch.masked_fill",
    "torch.gather",
)
MIXING_METHODS = (
    "masked_fill",
    "masked_fill_",
    "add",
    "add_",
    "mul",
    "mul_",
    "sub",
    "div",
    "matmul",
    "bmm",
    "gather",
    "scatter",
    "scatter_add",
    "index_add",
    "where",
    "expand_as",
    "lt",
    "gt",
    "le",
    "ge",
    "eq",
    "ne",
    "copy_",
    "masked_scatter",
)


@rule(
    "TD204",
    "device-less-tensor-in-forward",
    Severity.WARNING,
    "A tensor created in `forward()` without `device=` and mixed with the inputs.",
    fixable=True,
    # every finding is at a call of one of CPU_FACTORIES (not `forward`: a method's own name is
    # no name a file spells)
    spells=called_names(*CPU_FACTORIES),
)
def device_less_tensor_in_forward(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    if "forward" not in sem.methods_by_name:
        return  # every finding is in a module class's `forward` method
    for call in sem.calls_to(*CPU_FACTORIES):
        function = _forward_around(sem, call)
        if function is None:
            continue
        if any(k.arg == "device" or k.arg is None for k in call.keywords):
            continue
        if sem.call_qualname(call) == "torch.tensor" and not (
            call.args and isinstance(call.args[0], ast.List | ast.Tuple)
        ):
            continue  # `torch.tensor(2.0)`: a 0-dim CPU tensor mixes with any device
        if _moved_right_away(ctx, call):
            continue
        inputs = _input_names(ctx, function)
        if not _mixed_with_inputs(ctx, call, function, inputs):
            continue
        factory = ctx.doc.source_of(call.func)
        message = (
            f"`{factory}(...)` without `device=` creates the tensor on the CPU, and it is "
            "combined with the inputs: as soon as the model runs on a GPU this raises "
            '"Expected all tensors to be on the same device"; create it on the input\'s device'
        )
        yield ctx.finding("TD204", call, message, _device_fix(ctx, call, function))


def _moved_right_away(ctx: RuleContext, call: ast.Call) -> bool:
    """`torch.arange(T).unsqueeze(0).to(x.device)`: moved in the same expression."""
    node: ast.AST = call
    while True:
        parent = ctx.sem.parent(node)
        if not isinstance(parent, ast.Attribute) or parent.value is not node:
            return False
        grand = ctx.sem.parent(parent)
        if not isinstance(grand, ast.Call) or grand.func is not parent:
            return False
        if parent.attr in MOVING_METHODS_FOR_DEVICE:
            return True
        node = grand


def _input_names(ctx: RuleContext, function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The forward's tensor inputs and the names computed from them (not their sizes): found
    once per forward, however many tensors it creates."""
    key = f"layout:input-names:{id(function)}"
    found: set[str] | None = ctx.sem.derived.get(key)
    if found is None:
        found = ctx.sem.derived[key] = _find_input_names(ctx, function)
    return found


def _find_input_names(
    ctx: RuleContext, function: ast.FunctionDef | ast.AsyncFunctionDef
) -> set[str]:
    arguments = function.args
    names = {
        a.arg
        for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        if a.arg not in ("self", "cls")
    }
    for node in walk(function):
        if not isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) or node.value is None:
            continue
        if _derives_from(ctx, node.value, names):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in _flat_names(targets):
                names.add(target)
    return names


def _flat_names(targets: list[ast.expr]) -> Iterator[str]:
    for target in targets:
        if isinstance(target, ast.Name):
            yield target.id
        elif isinstance(target, ast.Tuple | ast.List):
            yield from _flat_names(list(target.elts))


def _derives_from(ctx: RuleContext, expr: ast.AST, names: set[str]) -> bool:
    """`expr` carries a tensor computed from `names` (or from a submodule call) — not a size."""
    pending = [expr]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Attribute) and node.attr in SIZE_ATTRIBUTES:
            continue
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in SIZE_METHODS:
                continue
            if isinstance(func, ast.Name) and func.id in ("len", "int", "float", "range"):
                continue
            dotted = ctx.sem.dotted(func) or ""
            if dotted.startswith("self.") and ctx.sem.kind_of(func) is ValueKind.MODEL:
                return True
        if isinstance(node, ast.Name) and node.id in names:
            return True
        pending.extend(child_nodes(node))
    return False


def _mixed_with_inputs(
    ctx: RuleContext, call: ast.Call, function: ast.AST, inputs: set[str]
) -> bool:
    """The new tensor (or the name it is bound to) meets an input tensor in an operation."""
    created = _outermost_chain(ctx, call)
    if _meets_inputs(ctx, created, inputs, set()):
        return True
    parent = ctx.sem.parent(created)
    if not (
        isinstance(parent, ast.Assign)
        and len(parent.targets) == 1
        and isinstance(parent.targets[0], ast.Name)
    ):
        return False
    name = parent.targets[0].id
    for node in walk(function):
        if not (isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)):
            continue
        if ctx.doc.span_of(node) < ctx.doc.span_of(parent):
            continue
        outer = _outermost_chain(ctx, node)
        if _is_moved(ctx, node):
            return False  # `mask = mask.to(x.device)` somewhere: the author moves it
        if _meets_inputs(ctx, outer, inputs, {name}):
            return True
    return False


def _outermost_chain(ctx: RuleContext, node: ast.AST) -> ast.AST:
    """The largest expression around `node` that is still a CPU tensor made from it alone:
    indexing, its own methods (`.unsqueeze(0)`), torch functions of it (`torch.tril(...)`),
    arithmetic and comparisons with constants (`mask == 0`, `noise * 0.1`)."""
    current = node
    while True:
        parent = ctx.sem.parent(current)
        if isinstance(parent, ast.Subscript) and parent.value is current:
            current = parent
            continue
        if isinstance(parent, ast.Attribute) and parent.value is current:
            grand = ctx.sem.parent(parent)
            if isinstance(grand, ast.Call) and grand.func is parent:
                if parent.attr in MIXING_METHODS or parent.attr in MOVING_METHODS_FOR_DEVICE:
                    return current
                current = grand
                continue
            return current
        if (
            isinstance(parent, ast.Call)
            and parent.args
            and parent.args[0] is current
            and is_tensor_call(ctx, parent)
            and ctx.sem.call_qualname(parent) not in MIXING_FUNCTIONS
        ):
            current = parent
            continue
        if isinstance(parent, ast.BinOp):
            other = parent.right if parent.left is current else parent.left
            if isinstance(other, ast.Constant):
                current = parent
                continue
        if isinstance(parent, ast.Compare):
            others = [o for o in (parent.left, *parent.comparators) if o is not current]
            if all(isinstance(o, ast.Constant) for o in others):
                current = parent
                continue
        if isinstance(parent, ast.UnaryOp):
            current = parent
            continue
        return current


def _is_moved(ctx: RuleContext, name: ast.Name) -> bool:
    parent = ctx.sem.parent(name)
    return isinstance(parent, ast.Attribute) and parent.attr in MOVING_METHODS_FOR_DEVICE


def _meets_inputs(ctx: RuleContext, node: ast.AST, inputs: set[str], own: set[str]) -> bool:
    parent = ctx.sem.parent(node)
    others: list[ast.AST] = []
    if isinstance(parent, ast.BinOp):
        others = [parent.right if parent.left is node else parent.left]
    elif isinstance(parent, ast.Compare):
        others = [parent.left, *parent.comparators]
        others = [o for o in others if o is not node]
    elif isinstance(parent, ast.List | ast.Tuple):
        holder = ctx.sem.parent(parent)
        if isinstance(holder, ast.Call) and ctx.sem.call_qualname(holder) in MIXING_FUNCTIONS:
            others = [e for e in parent.elts if e is not node]
    elif isinstance(parent, ast.Call):
        if ctx.sem.call_qualname(parent) in MIXING_FUNCTIONS:
            others = [a for a in parent.args if a is not node]
        elif isinstance(parent.func, ast.Attribute) and parent.func.attr in MIXING_METHODS:
            others = [parent.func.value]
        elif node in parent.args and ctx.sem.kind_of(parent.func) is ValueKind.MODEL:
            dotted = ctx.sem.dotted(parent.func) or ""
            return dotted.startswith("self.")  # a submodule: its weights live on the device
    elif isinstance(parent, ast.Attribute) and parent.value is node:
        grand = ctx.sem.parent(parent)
        if isinstance(grand, ast.Call) and parent.attr in MIXING_METHODS:
            others = [*grand.args]
    return any(
        _derives_from(ctx, other, inputs) and not _derives_from(ctx, other, own)
        for other in others
        if not isinstance(other, ast.Constant)
    )


def _device_fix(
    ctx: RuleContext, call: ast.Call, function: ast.FunctionDef | ast.AsyncFunctionDef
) -> Fix | None:
    arguments = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    candidates = [a for a in arguments if a not in ("self", "cls")]
    tensor_input = next((a for a in candidates if _forward_input_is_tensor(ctx, function, a)), None)
    if tensor_input is None:
        return None
    span = ctx.doc.span_of(call)
    inside = ctx.doc.text_in(Span(span.start_line, span.start_col, span.end_line, span.end_col - 1))
    separator = "" if inside.rstrip().endswith(("(", ",")) else ", "
    keyword = f"{separator}device={tensor_input}.device)"
    return Fix(
        f"Create it on `{tensor_input}.device`",
        (Edit(Span(span.end_line, span.end_col - 1, span.end_line, span.end_col), keyword),),
    )


def _forward_input_is_tensor(
    ctx: RuleContext, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str
) -> bool:
    """In `forward`, an input read as a tensor: `.shape`, `.size()`, `.device`, a tensor
    method, handed to a submodule (`self.emb(idx)`) or to a torch function."""
    if used_as_tensor(ctx, function, name):
        return True
    for node in walk(function):
        if not (isinstance(node, ast.Name) and node.id == name):
            continue
        parent = ctx.sem.parent(node)
        if isinstance(parent, ast.Attribute) and parent.attr in ("size", "device", "shape"):
            return True
        if isinstance(parent, ast.BinOp):
            return True
        if isinstance(parent, ast.Call) and node in parent.args:
            dotted = ctx.sem.dotted(parent.func) or ""
            if dotted.startswith("self.") and ctx.sem.kind_of(parent.func) is ValueKind.MODEL:
                return True
    return False


def _forward_around(sem: Semantics, node: ast.AST) -> Function | None:
    """The `forward` method of one of the file's module classes that `node` is in."""
    function = sem.enclosing_function(node)
    if function is None or function.name != "forward":
        return None
    owner = sem.parent(function)
    if isinstance(owner, ast.ClassDef) and sem.module_classes.get(owner.name) is owner:
        return function
    return None
