"""TD304 tensor-attribute-not-buffer: A plain tensor stored on self in __init__: not moved by
.to(), not in state_dict()."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...dataflow import assigned_plainly, flow_of
from ...findings import Finding, Fix, Severity, called_names, rule
from ...semantics import Semantics, end_position, position
from ...training import function_scope
from ...tree_walk import walk
from .module_classes import (
    method_named,
    methods_in,
    module_classes_of,
    named_elsewhere,
    self_assignments,
    self_attribute_uses,
    self_parameter,
)

TENSOR_FACTORIES = frozenset(
    {
        "zeros",
        "ones",
        "empty",
        "full",
        "rand",
        "randn",
        "randint",
        "randperm",
        "arange",
        "linspace",
        "logspace",
        "eye",
        "tensor",
        "as_tensor",
        "from_numpy",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "rand_like",
        "randn_like",
        "randint_like",
        "tril",
        "triu",
        "tril_indices",
        "triu_indices",
        "stack",
        "cat",
        "Tensor",
        "FloatTensor",
        "DoubleTensor",
        "HalfTensor",
        "LongTensor",
        "IntTensor",
        "BoolTensor",
        "ByteTensor",
        "normal",
        "bernoulli",
        "polar",
        "complex",
        "meshgrid",
        "cumsum",
        "exp",
        "log",
        "sqrt",
        "outer",
        "diag",
        "sin",
        "cos",
        "pow",
    }
)
# methods after which a value is no longer a tensor
NON_TENSOR_METHODS = frozenset(
    {
        "item",
        "tolist",
        "numpy",
        "size",
        "dim",
        "numel",
        "nelement",
        "element_size",
        "stride",
        "data_ptr",
        "storage",
        "untyped_storage",
        "is_contiguous",
        "get_device",
    }
)


def _is_tensor_expression(ctx: RuleContext, node: ast.AST, depth: int = 0) -> bool:
    """A value built by torch tensor factories (followed through local variables)."""
    if depth > 6:
        return False
    # calls first (the node types tested are unrelated: the order changes no answer): most
    # values stored on `self` are calls (`nn.Linear(...)`), answered by their qualname
    if isinstance(node, ast.Call):
        func = node.func
        qualname = ctx.sem.qualname(func)
        if qualname is not None:
            # `torch.<one of TENSOR_FACTORIES>`, one set look-up
            return qualname in _FACTORY_QUALNAMES
        if isinstance(func, ast.Attribute) and func.attr not in NON_TENSOR_METHODS:
            return _is_tensor_expression(ctx, func.value, depth + 1)
        return False
    if isinstance(node, ast.Name):
        definition = _reaching_assignment(ctx, node)
        return definition is not None and _is_tensor_expression(ctx, definition, depth + 1)
    if isinstance(node, ast.BinOp):
        return _is_tensor_expression(ctx, node.left, depth + 1) or _is_tensor_expression(
            ctx, node.right, depth + 1
        )
    if isinstance(node, ast.UnaryOp):
        return _is_tensor_expression(ctx, node.operand, depth + 1)
    if isinstance(node, ast.Subscript):
        return _is_tensor_expression(ctx, node.value, depth + 1)
    if isinstance(node, ast.IfExp):
        # `torch.zeros(3) if cond else None`: a tensor on one branch is enough (the other may
        # be None, which `register_buffer` accepts too)
        return _is_tensor_expression(ctx, node.body, depth + 1) or _is_tensor_expression(
            ctx, node.orelse, depth + 1
        )
    return False


def _reaching_assignment(ctx: RuleContext, name: ast.Name) -> ast.expr | None:
    """The value last assigned to `name` (by a plain `name = value`) before its statement."""
    sem = ctx.sem
    scope = function_scope(sem, name)
    if not assigned_plainly(sem, scope, name.id):
        return None  # `self.dim = dim` of a parameter: most names are, and the flow costs more
    definition = flow_of(sem, scope).reaching(name.id, name)
    if definition is None or definition.value is None:
        return None
    node = definition.node
    if (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
    ):
        return definition.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return definition.value
    return None


def _is_scalar_constant(ctx: RuleContext, node: ast.AST) -> bool:
    """`torch.tensor(1.0)`, `torch.tensor(drop_rate)` of a `float` parameter: a 0-dim CPU
    tensor mixes with tensors on any device."""
    return (
        isinstance(node, ast.Call)
        and ctx.sem.qualname(node.func) == "torch.tensor"
        and len(node.args) == 1
        and _is_number(ctx, node.args[0])
        and not _requires_grad(node)
    )


NUMBER_ANNOTATIONS = frozenset({"int", "float", "bool"})


def _is_number(ctx: RuleContext, node: ast.AST) -> bool:
    """A number literal, or a parameter of the enclosing function that is annotated as a
    number or has a number as its default."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float)
    if not isinstance(node, ast.Name):
        return False
    function = ctx.sem.enclosing_function(node)
    if function is None or _reaching_assignment(ctx, node) is not None:
        return False
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults: dict[str, ast.expr | None] = dict.fromkeys(a.arg for a in positional)
    # positional defaults belong to the last parameters
    with_defaults = positional[len(positional) - len(arguments.defaults) :]
    for argument, default in zip(with_defaults, arguments.defaults, strict=False):
        defaults[argument.arg] = default
    for argument, kw_default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=False):
        defaults[argument.arg] = kw_default
    for argument in [*positional, *arguments.kwonlyargs]:
        if argument.arg != node.id:
            continue
        annotation = argument.annotation
        if annotation is not None:
            return isinstance(annotation, ast.Name) and annotation.id in NUMBER_ANNOTATIONS
        given = defaults.get(argument.arg)
        return (
            isinstance(given, ast.Constant)
            and isinstance(given.value, int | float)
            and not isinstance(given.value, bool)
        )
    return False


def _requires_grad(node: ast.AST) -> bool:
    for child in walk(node):
        if isinstance(child, ast.Call):
            for keyword in child.keywords:
                if (
                    keyword.arg == "requires_grad"
                    and isinstance(keyword.value, ast.Constant)
                    and keyword.value.value is True
                ):
                    return True
            func = child.func
            if isinstance(func, ast.Attribute) and func.attr == "requires_grad_":
                if not child.args or (
                    isinstance(child.args[0], ast.Constant) and child.args[0].value is True
                ):
                    return True
    return False


DEVICE_METHODS = frozenset({"to", "cuda", "cpu", "type_as"})
_FACTORY_QUALNAMES = frozenset(f"torch.{name}" for name in TENSOR_FACTORIES)


@rule(
    "TD304",
    "tensor-attribute-not-buffer",
    Severity.WARNING,
    "A plain tensor stored on self in __init__: not moved by .to(), not in state_dict().",
    fixable=True,
    # every finding needs a call of a `torch.<factory>` in a module class (see
    # `_factory_called_in_module_class`): an attribute so named, or a name imported as one
    spells=called_names(*_FACTORY_QUALNAMES),
)
def tensor_attribute_not_buffer(ctx: RuleContext) -> Iterator[Finding]:
    if not _factory_called_in_module_class(ctx.sem):
        return  # every tensor expression starts at a call of a torch factory in the method
    reported: set[tuple[int, str]] = set()
    moves_itself: dict[int, bool] = {}  # per class: it defines `_apply` or `to`
    for assign, target, method, cls in self_assignments(ctx):
        if method.name != "__init__" or (id(cls), target.attr) in reported:
            continue
        value = assign.value
        assert value is not None
        # the value first: most are no tensor (`nn.Linear(...)`), and the class is looked
        # over only for one that is
        if not _is_tensor_expression(ctx, value):
            continue
        custom = moves_itself.get(id(cls))
        if custom is None:
            custom = moves_itself[id(cls)] = (
                method_named(cls, "_apply") is not None or method_named(cls, "to") is not None
            )
        if custom or _is_scalar_constant(ctx, value):
            continue
        if target.attr in FRAMEWORK_MOVED_ATTRIBUTES:
            continue
        if _handled_elsewhere(ctx, cls, target.attr, assign) or _init_only(ctx, cls, target.attr):
            continue
        if _reassigned_after_init(ctx, cls, target.attr) or _device_neutral_uses(
            ctx, cls, target.attr
        ):
            continue
        reported.add((id(cls), target.attr))
        yield _plain_tensor_finding(ctx, assign, target, self_parameter(method) or "self")


def _factory_called_in_module_class(sem: Semantics) -> bool:
    """Some call of a torch tensor factory lies inside an nn.Module subclass: where every value
    `_is_tensor_expression` answers for starts (it follows names through the assignments of
    the method that stores the value, and never into a nested function). Asked before the
    assignments to `self` are looked at: most files call factories in training code only."""
    groups = sem.whole.calls_by_qualname
    # the factories called, found in C by a pass over the file's qualnames (no set of them)
    factories = _FACTORY_QUALNAMES.intersection(groups)
    if not factories:
        return False
    spans = [(position(cls), end_position(cls)) for cls in module_classes_of(sem)]
    for qualname in factories:
        for call in groups[qualname]:
            where = position(call)
            for start, end in spans:
                if start <= where < end:
                    return True
    return False


def _handled_elsewhere(ctx: RuleContext, cls: ast.ClassDef, attr: str, assign: ast.AST) -> bool:
    """Re-assigned as a Parameter, registered, or moved by hand (`self.t.to(x.device)`)."""
    sem = ctx.sem
    for node, _ in self_attribute_uses(ctx.sem, cls, attr):
        parent = sem.parent(node)
        if isinstance(parent, ast.Attribute) and parent.attr in DEVICE_METHODS:
            return True
        if isinstance(parent, ast.Assign | ast.AnnAssign) and parent is not assign:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if node in targets and _is_parameter_call(sem, parent.value):
                return True
        if isinstance(parent, ast.Call) and node in parent.args and _is_parameter_call(sem, parent):
            return True
    for call in sem.method_calls("register_buffer") + sem.method_calls("register_parameter"):
        if call.args and isinstance(call.args[0], ast.Constant) and call.args[0].value == attr:
            if sem.enclosing_function(call) in methods_in(cls):
                return True
    return False


# attributes a framework reads and moves itself: Lightning's `example_input_array` is the
# example batch it feeds to the model summary and graph logger, moved to the device by Lightning
FRAMEWORK_MOVED_ATTRIBUTES = frozenset({"example_input_array"})


def _init_only(ctx: RuleContext, cls: ast.ClassDef, attr: str) -> bool:
    """Read only while `__init__` builds the module (and named nowhere else in the file, other
    classes' own `self.<attr>` aside): where the tensor stays after `.to()` never matters."""
    uses = list(self_attribute_uses(ctx.sem, cls, attr))
    if any(method.name != "__init__" for _, method in uses):
        return False
    if not any(isinstance(node.ctx, ast.Load) for node, _ in uses):
        return False  # never read here: code elsewhere may use it
    return not named_elsewhere(ctx, cls, attr, uses)


def _reassigned_after_init(ctx: RuleContext, cls: ast.ClassDef, attr: str) -> bool:
    """`self.masks = torch.empty(0)` in `__init__`, replaced in `forward()`: a placeholder for
    state the method that replaces it creates (on the device it chooses there). An augmented
    assignment (`self.total += x`) updates the old tensor in place: it does not count."""
    for node, method in self_attribute_uses(ctx.sem, cls, attr):
        if method.name == "__init__" or not isinstance(node.ctx, ast.Store):
            continue
        statement = ctx.sem.parent(node)
        if isinstance(statement, ast.Assign | ast.AnnAssign):
            return True
    return False


# uses that work the same whatever device the tensor is on
SHAPE_ATTRIBUTES = frozenset({"shape", "ndim", "dtype", "size", "dim", "numel", "nelement"})


def _device_neutral_uses(ctx: RuleContext, cls: ast.ClassDef, attr: str) -> bool:
    """Outside `__init__`, the tensor is only measured (`self.grid.size()`) or copied into
    another tensor (`batch[i] = self.grid`, a copy across devices): forward never mixes it
    with the inputs, so where it stays after `.to()` does not break anything."""
    sem = ctx.sem
    found = False
    for node, method in self_attribute_uses(ctx.sem, cls, attr):
        if method.name == "__init__":
            continue
        found = True
        parent = sem.parent(node)
        if isinstance(parent, ast.Attribute) and parent.attr in SHAPE_ATTRIBUTES:
            continue
        if (
            isinstance(parent, ast.Assign)
            and parent.value is node
            and all(_is_basic_index_store(t) for t in parent.targets)
        ):
            continue
        return False
    return found


def _is_basic_index_store(target: ast.expr) -> bool:
    """`out[i]`, `out[i, :, :]`, `out[0:2]`: a view of the target takes the copy."""
    if not isinstance(target, ast.Subscript):
        return False
    parts = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
    return all(isinstance(p, ast.Name | ast.Constant | ast.Slice) for p in parts)


def _is_parameter_call(sem: Semantics, node: ast.AST | None) -> bool:
    """`nn.Parameter(...)`, `nn.Buffer(...)`."""
    if not isinstance(node, ast.Call):
        return False
    qualname = sem.qualname(node.func) or ""
    return qualname.startswith("torch.nn.") and qualname.endswith(("Parameter", "Buffer"))


def _plain_tensor_finding(
    ctx: RuleContext, assign: ast.Assign | ast.AnnAssign, target: ast.Attribute, self_name: str
) -> Finding:
    value = assign.value
    assert value is not None
    if _requires_grad(value):
        message = (
            f"`{self_name}.{target.attr}` is a plain tensor that requires grad, not an "
            "nn.Parameter: it is missing from `parameters()` (the optimizer never updates it), "
            "from `state_dict()`, and `.to()`/`.cuda()` leave it where it is; wrap it in "
            "`nn.Parameter(...)`"
        )
        return ctx.finding("TD304", assign, message)
    message = (
        f"`{self_name}.{target.attr}` is a plain tensor attribute: `.to()`/`.cuda()`/`.half()` "
        "leave it on its old device and dtype (forward then fails with a device mismatch once "
        "the inputs are on the GPU) and `state_dict()` does not save it; register it with "
        f'`{self_name}.register_buffer("{target.attr}", ...)`'
    )
    fix = None
    if isinstance(assign, ast.Assign):
        fix = Fix(
            f"Register `{target.attr}` as a buffer",
            (
                ctx.replace(
                    assign,
                    f'{self_name}.register_buffer("{target.attr}", {ctx.doc.source_of(value)})',
                ),
            ),
            safe=False,
        )
    return ctx.finding("TD304", assign, message, fix)
