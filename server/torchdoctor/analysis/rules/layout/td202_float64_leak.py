"""TD202 float64-leak: A float64 tensor (from numpy or `.double()`) fed to a float32 model."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...file_facts import file_fact
from ...findings import Edit, Finding, Fix, Severity, Span, called_names, rule
from ...semantics import MODEL_NAME, BlockIndex, Semantics, ValueKind, call_order, position
from ._shared import element_for, int_constant, is_device_like, is_module_instance, reaching_binding

NUMPY_FLOAT_RANDOM = frozenset(
    {
        "rand",
        "randn",
        "random",
        "random_sample",
        "ranf",
        "sample",
        "uniform",
        "normal",
        "standard_normal",
        "exponential",
        "gamma",
        "beta",
        "lognormal",
        "laplace",
        "logistic",
        "chisquare",
        "standard_cauchy",
        "standard_t",
        "triangular",
        "standard_exponential",
        "standard_gamma",
        "multivariate_normal",
        "dirichlet",
        "rayleigh",
        "weibull",
        "pareto",
    }
)
NUMPY_FLOAT_FACTORIES = frozenset({"zeros", "ones", "empty", "eye", "identity"})
NUMPY_FLOAT_ALWAYS = frozenset({"linspace", "logspace", "geomspace", "loadtxt", "genfromtxt"})
FLOAT64_SPELLINGS = frozenset(
    {
        "numpy.float64",
        "numpy.double",
        "float",
        "float64",
        "double",
        "f8",
        "torch.float64",
        "torch.double",
    }
)
DTYPE_KEEPING_METHODS = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "unsqueeze",
        "squeeze",
        "view",
        "reshape",
        "permute",
        "transpose",
        "contiguous",
        "clone",
        "detach",
        "requires_grad_",
        "pin_memory",
        "flatten",
        "t",
    }
)
TENSOR_FROM_NUMPY = ("torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.asarray")


@rule(
    "TD202",
    "float64-leak",
    Severity.ERROR,
    "A float64 tensor (from numpy or `.double()`) fed to a float32 model.",
    fixable=True,
    # every finding is at its float64 source, a `.double()` call or a call of one of
    # TENSOR_FROM_NUMPY (`_float64_source`; `_makes_float64_tensors` stops without them)
    spells=("double", *called_names(*TENSOR_FROM_NUMPY)),
)
def float64_leak(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    if not _makes_float64_tensors(ctx) or _sets_default_dtype(ctx):
        return
    if _has_float64_model(ctx):
        return
    reported: set[int] = set()
    for call in _may_call_models(sem):
        if not call.args or sem.kind_of(call.func) is not ValueKind.MODEL:
            continue
        if not is_module_instance(ctx, call.func):
            continue
        for argument in call.args:
            source = _float64_source(ctx, argument, call, 0)
            if source is None or id(source) in reported:
                continue
            reported.add(id(source))
            model = ctx.doc.source_of(call.func)
            yield _float64_finding(ctx, source, model)


def _may_call_models(sem: Semantics) -> list[ast.Call]:
    """In the order of `sem.calls`, the calls whose callee `kind_of` may call a model: a name
    or attribute whose last part is that of a name assigned a model, or is spelt like a
    model's (`MODEL_NAME`). Found among the calls grouped by callee, not by asking the kind of
    every callee of the file."""
    assigned = {
        dotted.rpartition(".")[2]
        for dotted, kind in sem.whole.kinds.items()
        if kind is ValueKind.MODEL
    }
    found: list[ast.Call] = []
    for groups in (sem.calls_by_name, sem.calls_by_attr):
        for callee, calls in groups.items():
            if callee in assigned or MODEL_NAME.search(callee):
                found.extend(calls)
    found.sort(key=call_order)
    return found


def _float64_finding(ctx: RuleContext, source: ast.Call, model: str) -> Finding:
    is_double = isinstance(source.func, ast.Attribute) and source.func.attr == "double"
    origin = "`.double()`" if is_double else "a float64 numpy array"
    message = (
        f"this tensor is float64 ({origin}) and goes into `{model}`, whose weights are float32: "
        'the first layer raises "mat1 and mat2 must have the same dtype, but got Double and '
        'Float" (a convolution: "Input type (double) and bias type (float) should be the '
        'same"); convert it with `.float()`'
    )
    if is_double:
        attribute = ctx.doc.span_of(source.func)
        name = Span(
            attribute.end_line,
            attribute.end_col - len("double"),
            attribute.end_line,
            attribute.end_col + 1,
        )
        fix = Fix("Use `.float()` instead of `.double()`", (Edit(name, "float("),), safe=False)
    else:
        fix = _float32_fix(ctx, source)
    return ctx.finding("TD202", source, message, fix)


def _float32_fix(ctx: RuleContext, call: ast.Call) -> Fix:
    qualname = ctx.sem.call_qualname(call) or ""
    func = call.func
    root = func
    while isinstance(root, ast.Attribute):
        root = root.value
    alias = root.id if isinstance(root, ast.Name) and func is not root else None
    if qualname != "torch.from_numpy" and alias is not None and len(call.args) == 1:
        span = ctx.doc.span_of(call)
        closing = Span(span.end_line, span.end_col - 1, span.end_line, span.end_col)
        separator = (
            ", "
            if not ctx.doc.text_in(
                Span(span.start_line, span.start_col, span.end_line, span.end_col - 1)
            )
            .rstrip()
            .endswith(",")
            else " "
        )
        return Fix(
            f"Add `dtype={alias}.float32`",
            (Edit(closing, f"{separator}dtype={alias}.float32)"),),
        )
    span = ctx.doc.span_of(call)
    closing = Span(span.end_line, span.end_col - 1, span.end_line, span.end_col)
    return Fix("Append `.float()`", (Edit(closing, ").float()"),))


@file_fact("makes-float64-tensors")
def _makes_float64_tensors(ctx: RuleContext) -> bool:
    """The file calls `.double()` or makes a tensor from an array: every source this rule
    reports is one of those calls, so a file without them needs no look at its model calls."""
    whole = ctx.sem.whole
    return bool(whole.calls_by_attr.get("double") or whole.calls_to(*TENSOR_FROM_NUMPY))


@file_fact("sets-default-dtype")
def _sets_default_dtype(ctx: RuleContext) -> bool:
    defaults = ctx.sem.whole.calls_to("torch.set_default_dtype", "torch.set_default_tensor_type")
    return bool(defaults)


@file_fact("float64-model")
def _has_float64_model(ctx: RuleContext) -> bool:
    """The file converts a model to float64 (`model.double()`, `net.to(torch.float64)`)."""
    # the calls that convert one, block by block, kept while no kind of name changes
    found = ctx.sem.gathered("layout:float64-model", float64_conversions, reads_kinds=True)
    return bool(found)


def float64_conversions(sem: Semantics, block: BlockIndex) -> dict[str, list[ast.Call]]:
    """The calls of a block that convert a model to float64, in source order."""
    found: list[ast.Call] = []
    for attr in ("double", "to", "type"):
        for call in block.calls_by_attr.get(attr, ()):
            func = call.func
            assert isinstance(func, ast.Attribute)  # calls by attribute: attribute calls
            receiver = func.value
            is_model = (
                sem.kind_of(receiver) is ValueKind.MODEL
                or (isinstance(receiver, ast.Name) and receiver.id == "self")
                or (isinstance(receiver, ast.Call) and _builds_module(sem, receiver))
            )
            if not is_model:
                continue
            values = [*call.args, *(k.value for k in call.keywords)]
            if attr == "double" or any(_spells_float64(sem, v) for v in values):
                found.append(call)
    found.sort(key=position)
    return {"": found} if found else {}


def _builds_module(sem: Semantics, call: ast.Call) -> bool:
    """`nn.Linear(10, 1)`, `Net()`, `model.to(device)`: an expression that makes a module."""
    if sem.kind_of(call.func) is ValueKind.MODEL:
        return True
    dotted = sem.dotted(call.func)
    if dotted is not None and dotted in sem.module_classes:
        return True
    qualname = sem.call_qualname(call) or ""
    head, _, last = qualname.rpartition(".")
    if head in ("torch.nn", "torch.nn.modules") and last[:1].isupper():
        return True
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in ("to", "cuda", "cpu", "float"):
        receiver = func.value
        if isinstance(receiver, ast.Call):
            return _builds_module(sem, receiver)
        return sem.kind_of(receiver) is ValueKind.MODEL
    return False


def _spells_float64(sem: Semantics, node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in FLOAT64_SPELLINGS
    if isinstance(node, ast.Name) and node.id == "float":
        return True
    name = sem.qualname(node) or ""
    return name in FLOAT64_SPELLINGS or name.endswith("DoubleTensor")


def _float64_source(ctx: RuleContext, expr: ast.AST, at: ast.AST, depth: int) -> ast.Call | None:
    """The call that made `expr` a float64 tensor: `torch.from_numpy(<float64 array>)` (also
    `tensor`/`as_tensor` without a dtype), or `x.double()`; followed through names and
    dtype-keeping methods (`.to(device)`, `.unsqueeze(0)`)."""
    if depth > 4:
        return None
    sem = ctx.sem
    if isinstance(expr, ast.Call):
        qualname = sem.call_qualname(expr)
        if qualname in TENSOR_FROM_NUMPY:
            if expr.keywords or len(expr.args) != 1:
                return None  # dtype= given (or device=, leave it alone)
            return expr if _is_numpy_float64(ctx, expr.args[0], at, 0) else None
        func = expr.func
        if not isinstance(func, ast.Attribute):
            return None
        if func.attr == "double" and not expr.args and not expr.keywords:
            return expr
        if func.attr not in DTYPE_KEEPING_METHODS:
            return None
        if func.attr == "to" and not all(is_device_like(ctx, a) for a in expr.args):
            return None
        if any(k.arg in ("dtype",) for k in expr.keywords):
            return None
        return _float64_source(ctx, func.value, at, depth + 1)
    if isinstance(expr, ast.Subscript):
        return _float64_source(ctx, expr.value, at, depth + 1)
    if isinstance(expr, ast.Name):
        definition = reaching_binding(ctx, expr.id, at)
        if definition is None or not isinstance(definition.node, ast.Assign | ast.AnnAssign):
            return None
        if definition.value is None:
            return None
        value = element_for(definition.node, expr.id, definition.value)
        if value is None:
            return None
        return _float64_source(ctx, value, definition.node, depth + 1)
    return None


def _is_numpy_float64(ctx: RuleContext, expr: ast.AST, at: ast.AST, depth: int) -> bool:
    """`expr` is a numpy array of float64, by the numpy defaults: `np.random.rand`, `np.zeros`
    without a dtype, `np.array([0.5, 1.5])`, `np.loadtxt`, `.astype(np.float64)`..."""
    if depth > 4:
        return False
    sem = ctx.sem
    if isinstance(expr, ast.Call):
        qualname = sem.call_qualname(expr) or ""
        func = expr.func
        if qualname.startswith("numpy."):
            return _numpy_call_is_float64(ctx, expr, qualname)
        if isinstance(func, ast.Attribute):
            if func.attr == "astype" and expr.args:
                return _spells_float64(ctx.sem, expr.args[0])
            if func.attr in ("random", "normal", "standard_normal", "uniform", "exponential"):
                return _is_numpy_generator(ctx, func.value, at)
            if func.attr in ("copy", "reshape", "squeeze", "transpose", "flatten", "ravel"):
                return _is_numpy_float64(ctx, func.value, at, depth + 1)
        return False
    if isinstance(expr, ast.BinOp):
        left = _is_numpy_float64(ctx, expr.left, at, depth + 1)
        right = _is_numpy_float64(ctx, expr.right, at, depth + 1)
        if left and right:
            return True
        other = expr.right if left else expr.left if right else None
        return (
            other is not None
            and isinstance(other, ast.Constant)
            and isinstance(other.value, int | float)
        )
    if isinstance(expr, ast.Subscript):
        return _is_numpy_float64(ctx, expr.value, at, depth + 1)
    if isinstance(expr, ast.Name):
        definition = reaching_binding(ctx, expr.id, at)
        if definition is None or not isinstance(definition.node, ast.Assign | ast.AnnAssign):
            return False
        if definition.value is None:
            return False
        value = element_for(definition.node, expr.id, definition.value)
        return value is not None and _is_numpy_float64(ctx, value, definition.node, depth + 1)
    return False


def _numpy_call_is_float64(ctx: RuleContext, call: ast.Call, qualname: str) -> bool:
    last = qualname.rsplit(".", 1)[-1]
    dtype = next((k.value for k in call.keywords if k.arg == "dtype"), None)
    if dtype is not None:
        return _spells_float64(ctx.sem, dtype)
    if qualname.startswith("numpy.random.") and qualname.count(".") == 2:
        return last in NUMPY_FLOAT_RANDOM
    if qualname.count(".") != 1:
        return False
    if last in NUMPY_FLOAT_FACTORIES:
        return len(call.args) <= (1 if last != "eye" else 3)
    if last in NUMPY_FLOAT_ALWAYS:
        return True
    if last == "full" and len(call.args) == 2:
        fill = call.args[1]
        return isinstance(fill, ast.Constant) and type(fill.value) is float
    if last == "arange":
        return any(isinstance(a, ast.Constant) and type(a.value) is float for a in call.args)
    if last in ("array", "asarray", "ascontiguousarray") and len(call.args) == 1:
        return _float_literal(call.args[0])
    return False


def _float_literal(node: ast.AST) -> bool:
    """A (nested) list/tuple literal of numbers with at least one float."""
    if not isinstance(node, ast.List | ast.Tuple):
        return False
    found = False
    for element in node.elts:
        if isinstance(element, ast.List | ast.Tuple):
            found = _float_literal(element) or found
        elif isinstance(element, ast.Constant) and type(element.value) is float:
            found = True
        elif not (isinstance(element, ast.Constant) and type(element.value) is int):
            if int_constant(element) is None:
                return False
    return found


def _is_numpy_generator(ctx: RuleContext, expr: ast.AST, at: ast.AST) -> bool:
    """`np.random.default_rng(...)` or a name bound to one."""
    if isinstance(expr, ast.Call):
        return ctx.sem.call_qualname(expr) == "numpy.random.default_rng"
    if isinstance(expr, ast.Name):
        definition = reaching_binding(ctx, expr.id, at)
        return (
            definition is not None
            and isinstance(definition.value, ast.Call)
            and ctx.sem.call_qualname(definition.value) == "numpy.random.default_rng"
        )
    return False
