"""Where a loss's input comes from: the activation (softmax, log-softmax, sigmoid) applied before
it, through names, layers and model outputs (TD305, TD306)."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

from ...assigned_calls import definition_of, single_assignments_to, without_moves
from ...context import RuleContext
from ...dataflow import flow_of
from ...findings import Edit, Fix, Span
from ...function_body import own_nodes
from ...semantics import BlockIndex, Semantics, call_order
from ...training import function_scope, statement_list_of
from ...tree_walk import walk
from .module_classes import built_from, constructor_name, local_class, method_named, nn_class_name

SOFTMAX_FUNCTIONS = frozenset(
    {"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"}
)
LOG_SOFTMAX_FUNCTIONS = frozenset(
    {"torch.log_softmax", "torch.nn.functional.log_softmax", "torch.special.log_softmax"}
)
SIGMOID_FUNCTIONS = frozenset(
    {"torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit"}
)
ACTIVATION_CLASSES = {
    "Softmax": "softmax",
    "LogSoftmax": "log_softmax",
    "Sigmoid": "sigmoid",
    "Linear": "logits",
    "LazyLinear": "logits",
}
ACTIVATION_METHODS = {"softmax": "softmax", "log_softmax": "log_softmax", "sigmoid": "sigmoid"}
# methods and indexing that keep what a value is (probabilities stay probabilities)
SHAPE_METHODS = frozenset(
    {
        "view",
        "reshape",
        "flatten",
        "squeeze",
        "unsqueeze",
        "permute",
        "transpose",
        "contiguous",
        "float",
        "double",
        "half",
        "to",
        "cuda",
        "cpu",
        "view_as",
        "reshape_as",
        "type_as",
    }
)
LOSS_CLASSES = {
    "CrossEntropyLoss": "cross_entropy",
    "NLLLoss": "nll",
    "BCEWithLogitsLoss": "bce_with_logits",
    "BCELoss": "bce",
}
LOSS_FUNCTIONS = {
    "torch.nn.functional.cross_entropy": "cross_entropy",
    "torch.nn.functional.nll_loss": "nll",
    "torch.nn.functional.binary_cross_entropy_with_logits": "bce_with_logits",
    "torch.nn.functional.binary_cross_entropy": "bce",
}
LOSS_FUNCTION_NAMES = frozenset(name.rsplit(".", 1)[-1] for name in LOSS_FUNCTIONS)
# the last part of every qualname `loss_calls` looks for: a call of one spells it, or calls a
# name imported as one
_LOSS_LAST_NAMES = frozenset(LOSS_CLASSES) | LOSS_FUNCTION_NAMES


@dataclass(frozen=True)
class Origin:
    kind: str  # "softmax" | "log_softmax" | "sigmoid" | "logits"
    node: ast.AST  # the activation call, or the model call whose output it is
    activation_input: ast.expr | None  # what the activation was applied to (inline calls)
    hops: tuple[ast.Name, ...]  # the variables followed from the loss argument to the call
    from_model: bool = False


@dataclass(frozen=True)
class LossCall:
    call: ast.Call
    loss: str  # a LOSS_CLASSES / LOSS_FUNCTIONS value
    input: ast.expr
    inline_constructor: ast.Call | None  # `nn.BCELoss()(...)`
    functional: bool


def loss_calls(ctx: RuleContext) -> list[LossCall]:
    sem = ctx.sem
    cached: list[LossCall] | None = sem.derived.get("modules:loss_calls")
    if cached is not None:
        return cached
    found: list[LossCall] = []
    sem.derived["modules:loss_calls"] = found
    if not _may_call_losses(sem):
        return found
    criteria = names_assigned_losses(sem)
    last_parts = {name.rsplit(".", 1)[-1] for name in criteria}
    for call in _may_be_loss_calls(sem, LOSS_FUNCTION_NAMES | last_parts):
        func = call.func
        loss: str | None = None
        constructor: ast.Call | None = None
        functional = False
        if isinstance(func, ast.Call):  # `nn.CrossEntropyLoss()(out, y)`
            name = nn_class_name(sem, func.func)
            if name in LOSS_CLASSES:
                loss, constructor = LOSS_CLASSES[name], func
        elif isinstance(func, ast.Attribute) and func.attr in LOSS_FUNCTION_NAMES:
            qualname = sem.qualname(func)
            if qualname in LOSS_FUNCTIONS:
                loss, functional = LOSS_FUNCTIONS[qualname], True
        elif isinstance(func, ast.Name) and func.id in LOSS_FUNCTION_NAMES:
            qualname = sem.qualname(func)
            if qualname in LOSS_FUNCTIONS:
                loss, functional = LOSS_FUNCTIONS[qualname], True
        if loss is None and last_parts:
            last = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if last in last_parts and sem.dotted(func) in criteria:
                built = built_from(sem, func)
                if built is not None:
                    short = built.rsplit(".", 1)[-1]
                    if built.startswith("torch.nn.") and short in LOSS_CLASSES:
                        loss = LOSS_CLASSES[short]
        if loss is None:
            continue
        argument = _input_argument(call)
        if argument is not None:
            found.append(LossCall(call, loss, argument, constructor, functional))
    return found


def _may_be_loss_calls(sem: Semantics, names: frozenset[str] | set[str]) -> list[ast.Call]:
    """In the order of `sem.calls`, the calls `loss_calls` can take: of a called call
    (`nn.CrossEntropyLoss()(out, y)`), or of a callee spelt with one of `names` (the last
    parts of the functional losses and of the names assigned loss modules), found in the
    calls grouped by callee."""
    found = [call for call in sem.calls if type(call.func) is ast.Call]
    for name in names:
        found.extend(sem.calls_by_attr.get(name, ()))
        found.extend(sem.calls_by_name.get(name, ()))
    found.sort(key=call_order)
    return found


def _may_call_losses(sem: Semantics) -> bool:
    """Whether the file can hold a loss call: it spells one of the losses' names, or imports
    one under another name (`from torch.nn import CrossEntropyLoss as CE`)."""
    return sem.spells_any(_LOSS_LAST_NAMES)


def _last_names_of(losses: frozenset[str]) -> frozenset[str]:
    """The class and function names (last parts) of the losses `losses` names."""
    return frozenset(
        name.rsplit(".", 1)[-1]
        for table in (LOSS_CLASSES, LOSS_FUNCTIONS)
        for name, loss in table.items()
        if loss in losses
    )


# what a loss of each family is spelt with (TD305 and TD306 look at one family each)
CROSS_ENTROPY_NAMES = _last_names_of(frozenset({"cross_entropy", "nll"}))
BINARY_CROSS_ENTROPY_NAMES = _last_names_of(frozenset({"bce_with_logits", "bce"}))
# what a softmax is spelt with: the functions, the method and the layer
SOFTMAX_NAMES = frozenset(
    [name.rsplit(".", 1)[-1] for name in SOFTMAX_FUNCTIONS]
    + [name for name, kind in ACTIVATION_CLASSES.items() if kind == "softmax"]
    + [name for name, kind in ACTIVATION_METHODS.items() if kind == "softmax"]
)


def names_assigned_losses(sem: Semantics) -> Mapping[str, list[ast.expr]]:
    """Names and attributes this file assigns a loss module to (`criterion = nn.BCELoss()`),
    with the values."""
    return sem.gathered("modules:loss-names", _block_loss_names, reads_names=True)


def _block_loss_names(sem: Semantics, block: BlockIndex) -> dict[str, list[ast.expr]]:
    names: dict[str, list[ast.expr]] = {}
    for assign in block.assigns:
        # exact types (the parser makes no subclasses): a module is built by a call, and
        # `without_moves` leaves any other value as it is
        if type(assign.value) is not ast.Call or type(assign) is ast.AugAssign:
            continue
        value = without_moves(assign.value)
        func = value.func  # type: ignore[attr-defined]  # a call stays a call
        kind = type(func)
        last = func.attr if kind is ast.Attribute else func.id if kind is ast.Name else ""
        if not last.endswith("Loss"):
            continue
        built = constructor_name(sem, value)
        if built is None or not built.startswith("torch.nn.") or not built.endswith("Loss"):
            continue
        targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
        for target in targets:
            dotted = sem.dotted(target)
            if dotted is not None:
                names.setdefault(dotted, []).append(assign.value)
    return names


def _input_argument(call: ast.Call) -> ast.expr | None:
    if call.args and not isinstance(call.args[0], ast.Starred):
        return call.args[0]
    for keyword in call.keywords:
        if keyword.arg == "input":
            return keyword.value
    return None


def _activation_of_call(ctx: RuleContext, call: ast.Call) -> tuple[str, ast.expr | None] | None:
    """("softmax", its input) for `F.softmax(x, 1)`, `x.softmax(1)`, `nn.Softmax(1)(x)`…"""
    sem = ctx.sem
    func = call.func
    qualname = sem.qualname(func)
    first = call.args[0] if call.args and not isinstance(call.args[0], ast.Starred) else None
    if first is None:
        for keyword in call.keywords:
            if keyword.arg == "input":
                first = keyword.value
    if qualname is not None:
        if qualname in SOFTMAX_FUNCTIONS:
            return "softmax", first
        if qualname in LOG_SOFTMAX_FUNCTIONS:
            return "log_softmax", first
        if qualname in SIGMOID_FUNCTIONS:
            return "sigmoid", first
        return None
    if isinstance(func, ast.Call):  # `nn.Softmax(dim=1)(x)`
        name = nn_class_name(sem, func.func)
        if name in ACTIVATION_CLASSES:
            return ACTIVATION_CLASSES[name], first
        return None
    if isinstance(func, ast.Attribute) and func.attr in ACTIVATION_METHODS:
        if sem.dotted(func) is not None and built_from(sem, func) is not None:
            pass  # `self.softmax = nn.Softmax(1)` is handled below
        else:
            return ACTIVATION_METHODS[func.attr], func.value
    built = built_from(sem, func)
    if built is not None:
        last = built.rsplit(".", 1)[-1]
        if built.startswith("torch.nn.") and last in ACTIVATION_CLASSES:
            return ACTIVATION_CLASSES[last], first
    return None


def origin_of(
    ctx: RuleContext, expr: ast.expr, hops: tuple[ast.Name, ...] = (), depth: int = 0
) -> Origin | None:
    """Which activation (or raw linear output) a loss input was computed by."""
    sem = ctx.sem
    while True:
        if isinstance(expr, ast.Subscript):
            expr = expr.value
            continue
        if (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr in SHAPE_METHODS
            and sem.qualname(expr.func) is None
        ):
            expr = expr.func.value
            continue
        break
    if isinstance(expr, ast.Call):
        activation = _activation_of_call(ctx, expr)
        if activation is not None:
            return Origin(activation[0], expr, activation[1], hops)
        output = _model_output(ctx, expr)
        if output is not None:
            return Origin(output, expr, None, hops, from_model=True)
        return None
    if isinstance(expr, ast.Name) and depth < 4:
        key = f"modules:could-originate:{expr.id}"
        possible = sem.derived.get(key)
        if possible is None:
            possible = sem.derived[key] = any(
                _could_originate(ctx, a.value) for a in single_assignments_to(sem, expr.id)
            )
        if not possible:
            return None  # no assignment anywhere could make it an activation output
        flow = flow_of(sem, function_scope(sem, expr))
        definition = flow.reaching(expr.id, expr)
        if (
            definition is None
            or definition.value is None
            or not isinstance(definition.node, ast.Assign | ast.AnnAssign)
        ):
            return None
        node = definition.node
        if isinstance(node, ast.Assign) and not (
            len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            return None
        if not _runs_before(sem, node, expr):
            return None
        return origin_of(ctx, definition.value, (*hops, expr), depth + 1)
    return None


def _could_originate(ctx: RuleContext, value: ast.expr | None) -> bool:
    """A cheap test before following a variable: its value is an activation or known model
    output by itself, or another variable."""
    if value is None:
        return False
    while True:
        if isinstance(value, ast.Subscript):
            value = value.value
        elif (
            isinstance(value, ast.Call)
            and _is_shape_call(ctx, value)
            and isinstance(value.func, ast.Attribute)  # always, for a shape call
        ):
            value = value.func.value
        else:
            break
    if isinstance(value, ast.Name):
        return True
    return origin_of(ctx, value, depth=99) is not None


def _is_shape_call(ctx: RuleContext, node: ast.Call) -> bool:
    return (
        isinstance(node.func, ast.Attribute)
        and node.func.attr in SHAPE_METHODS
        and ctx.sem.qualname(node.func) is None
    )


def _runs_before(sem: Semantics, statement: ast.stmt, use: ast.AST) -> bool:
    """The assignment sits in the use's own block or an enclosing one (not in a branch)."""
    block = statement_list_of(sem, statement)
    if block is None:
        return False
    chain = {id(node) for node in (use, *sem.ancestors(use))}
    return any(id(s) in chain for s in block[block.index(statement) + 1 :])


def _model_output(ctx: RuleContext, call: ast.Call) -> str | None:
    """What a model call returns when the model is built in this file: a Sequential ending in
    nn.Softmax/nn.Sigmoid/nn.Linear, or a local module whose forward() returns one of those."""
    sem = ctx.sem
    func = call.func
    if isinstance(func, ast.Call):
        return _output_of_constructor(ctx, func, 0)
    built = built_from(sem, func)
    if built is None:
        return None
    if built in sem.module_classes:
        cls = local_class(sem, built)
        return _output_of_class(ctx, cls, 1) if cls is not None else None
    last = built.rsplit(".", 1)[-1]
    if not built.startswith("torch.nn.") or last != "Sequential":
        return ACTIVATION_CLASSES.get(last) if built.startswith("torch.nn.") else None
    definition = definition_of(ctx, func)
    if definition is not None:
        return _output_of_constructor(ctx, definition, 0)
    return None


def _output_of_constructor(ctx: RuleContext, constructor: ast.Call, depth: int) -> str | None:
    sem = ctx.sem
    if depth > 4:
        return None
    name = nn_class_name(sem, constructor.func)
    if name is not None:
        if name in ACTIVATION_CLASSES:
            return ACTIVATION_CLASSES[name]
        if name == "Sequential" and constructor.args:
            last = constructor.args[-1]
            if isinstance(last, ast.Call):
                return _output_of_constructor(ctx, last, depth + 1)
        return None
    dotted = sem.dotted(constructor.func)
    cls = local_class(sem, dotted) if dotted is not None else None
    if cls is None or dotted not in sem.module_classes:
        return None
    return _output_of_class(ctx, cls, depth + 1)


def _output_of_class(ctx: RuleContext, cls: ast.ClassDef, depth: int) -> str | None:
    key = f"modules:output:{id(cls)}"
    if key in ctx.sem.derived:
        known: str | None = ctx.sem.derived[key]
        return known
    ctx.sem.derived[key] = None  # recursion guard
    forward = method_named(cls, "forward")
    result: str | None = None
    if forward is not None:
        kinds: set[str | None] = set()
        for node in own_nodes(forward):
            if isinstance(node, ast.Return):
                if node.value is None:
                    kinds.add(None)
                    continue
                origin = origin_of(ctx, node.value)
                kind = origin.kind if origin is not None else None
                if kind is None and isinstance(node.value, ast.Call):
                    kind = _self_layer_output(ctx, node.value, depth)
                kinds.add(kind)
        if len(kinds) == 1:
            result = next(iter(kinds))
    ctx.sem.derived[key] = result
    return result


def _self_layer_output(ctx: RuleContext, call: ast.Call, depth: int) -> str | None:
    """`return self.fc(x)` with `self.fc = nn.Linear(...)` → raw logits."""
    definition = definition_of(ctx, call.func)
    if definition is None:
        return None
    return _output_of_constructor(ctx, definition, depth + 1)


def _reusable_at(ctx: RuleContext, expr: ast.expr, source_at: ast.AST, use_at: ast.AST) -> bool:
    """`expr` (made of names and attributes only) means the same at `use_at` as at `source_at`."""
    sem = ctx.sem
    flow = flow_of(sem, function_scope(sem, use_at))
    if function_scope(sem, source_at) is not function_scope(sem, use_at):
        return False
    for node in walk(expr):
        if isinstance(node, ast.Call | ast.Lambda | ast.NamedExpr | ast.Await):
            return False
        if isinstance(node, ast.Name):
            before = flow.reaching(node.id, source_at)
            if before is None or before is not flow.reaching(node.id, use_at):
                return False
    return isinstance(expr, ast.Name | ast.Attribute | ast.Subscript)


def remove_activation_fix(
    ctx: RuleContext, loss: LossCall, origin: Origin, what: str, title_input: str
) -> Fix | None:
    """Feed the loss what the activation was applied to."""
    if origin.from_model or origin.activation_input is None:
        return None
    if not origin.hops:
        replacement = ctx.operand_source(origin.activation_input)
        return Fix(
            f"Pass {title_input} to the loss instead of the {what} output",
            (ctx.replace(origin.node, replacement),),
            safe=False,
        )
    if len(origin.hops) != 1:
        return None
    name = origin.hops[0]
    if not _reusable_at(ctx, origin.activation_input, origin.node, name):
        return None
    return Fix(
        f"Pass `{ctx.doc.source_of(origin.activation_input)}` to the loss instead of `{name.id}`",
        (ctx.replace(name, ctx.operand_source(origin.activation_input)),),
        safe=False,
    )


def rename_attribute(ctx: RuleContext, node: ast.Attribute, attr: str) -> Edit:
    """Replace `.name` of `value.name` (the dot and the name only) by `.attr`."""
    value = ctx.doc.span_of(node.value)
    whole = ctx.doc.span_of(node)
    return Edit(Span(value.end_line, value.end_col, whole.end_line, whole.end_col), f".{attr}")
