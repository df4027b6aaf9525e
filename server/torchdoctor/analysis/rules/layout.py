"""Layout rules: where tensors live and how they are laid out in memory. `.view()` on a
transposed tensor, float64 leaking in from numpy, moves that are thrown away, tensors created on
the CPU inside `forward()`, host syncs and host-to-device copies repeated on every training step,
and `torch.tensor()` of a tensor."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ..context import RuleContext
from ..dataflow import Definition, flow_of
from ..findings import Edit, Finding, Fix, Severity, Span, rule
from ..semantics import FUNCTION_NODES, Loop, ValueKind
from ..training import function_scope, in_exclusive_branches, runs_every_iteration, training_of
from .device_evidence import syncs_on_every_step, targets_accelerator

# ---- shared helpers ------------------------------------------------------------------------
# Core candidates: "is this expression a tensor", "training loops (innermost loops around
# backward)" are asked by several families.

# torch.* callables that do not return a tensor (or may return anything)
NOT_TENSOR_FUNCTIONS = frozenset(
    {
        "device", "load", "compile", "Generator", "no_grad", "enable_grad", "inference_mode",
        "autocast", "set_grad_enabled", "manual_seed", "seed", "get_default_dtype", "Size",
        "is_tensor", "numel", "is_grad_enabled", "set_default_dtype", "save", "dtype",
        "get_rng_state", "set_rng_state", "finfo", "iinfo", "typename", "is_floating_point",
        "use_deterministic_algorithms", "set_num_threads", "get_num_threads", "broadcast_shapes",
        "unbind", "split", "chunk", "tensor_split", "meshgrid", "max", "min", "sort", "topk",
        "where", "unique", "nonzero", "svd", "qr", "eig", "lstsq", "histogram", "frexp",
        "aminmax", "std_mean", "var_mean", "kthvalue", "median", "mode",
    }
)
TENSOR_NAMESPACES = ("torch.nn.functional.", "torch.fft.", "torch.linalg.", "torch.special.")
# tensor methods that return a tensor (a method outside this list may return anything)
TENSOR_METHODS = frozenset(
    {
        "view", "reshape", "permute", "transpose", "t", "contiguous", "float", "double", "half",
        "bfloat16", "long", "int", "bool", "to", "cuda", "cpu", "detach", "clone", "unsqueeze",
        "squeeze", "flatten", "sum", "mean", "std", "var", "abs", "exp", "log", "sqrt", "pow",
        "softmax", "log_softmax", "argmax", "argmin", "masked_fill", "expand", "expand_as",
        "repeat", "gather", "index_select", "matmul", "mm", "bmm", "mul", "add", "sub", "div",
        "sigmoid", "tanh", "relu", "clamp", "round", "floor", "ceil", "norm", "sign", "neg",
        "cumsum", "type_as", "narrow", "select", "view_as", "reshape_as", "logical_not",
        "requires_grad_", "pin_memory", "square", "prod", "all", "any", "eq", "ne", "gt", "lt",
    }
)
TENSOR_ATTRIBUTES = ("shape", "dtype", "device", "ndim", "grad", "is_cuda", "T", "mT")
# methods only tensors have (`size`, `clone`, `contiguous` are left out: PyG's `Data` has them)
TENSOR_USE_METHODS = frozenset(
    {
        "dim", "view", "reshape", "unsqueeze", "squeeze", "permute", "transpose", "flatten",
        "masked_fill", "masked_fill_", "expand", "repeat", "chunk", "sum", "mean", "argmax",
        "softmax", "float", "long", "half", "detach", "item", "type_as", "new_zeros",
        "new_ones", "new_full", "new_empty", "new_tensor", "matmul", "bmm", "index_select",
        "gather", "clamp", "abs", "pow", "exp", "log", "sqrt", "topk", "narrow",
    }
)
# torch functions that build a tensor from Python data: an argument of theirs may be a list
TENSOR_CONSTRUCTORS = frozenset(
    {"torch.tensor", "torch.as_tensor", "torch.asarray", "torch.from_numpy", "torch.Tensor",
     "torch.FloatTensor", "torch.LongTensor", "torch.stack", "torch.cat"}
)
SIZE_ATTRIBUTES = ("shape", "ndim", "dtype", "device", "is_cuda", "layout")
SIZE_METHODS = ("size", "dim", "numel", "get_device", "element_size", "stride")


def _training_loops(ctx: RuleContext) -> list[Loop]:
    """The innermost loop around each `backward()`: the loops that run once per step."""
    key = "layout:training_loops"
    found = ctx.sem.derived.get(key)
    if found is None:
        seen: dict[int, Loop] = {}
        for call in training_of(ctx.sem).backward_calls:
            loops = ctx.sem.enclosing_loops(call)
            if loops:
                seen.setdefault(id(loops[0]), loops[0])
        found = ctx.sem.derived[key] = list(seen.values())
    return found


def _step_loop(ctx: RuleContext, node: ast.AST) -> Loop | None:
    """The training loop `node` runs in on every iteration, if any."""
    # asked for every call in a loop: the set is built once per analysis
    training = ctx.sem.derived.get("layout:training_loop_ids")
    if training is None:
        training = ctx.sem.derived["layout:training_loop_ids"] = {
            id(loop) for loop in _training_loops(ctx)
        }
    if not training:
        return None
    for loop in ctx.sem.enclosing_loops(node):
        if id(loop) in training:
            # work in an inner loop of the step still happens on every step
            every = runs_every_iteration(ctx.sem, node, loop, inner_loops_conditional=False)
            return loop if every else None
    return None


def _reaching(ctx: RuleContext, name: str, at: ast.AST) -> Definition | None:
    """The binding of `name` that `at` sees, unless it may not run before `at`."""
    definition = flow_of(ctx.sem, function_scope(ctx.sem, at)).reaching(name, at)
    statement = ctx.sem.enclosing_statement(at) or at
    if definition is not None and in_exclusive_branches(ctx.sem, definition.node, statement):
        return None  # bound in the other branch of an `if`: what reaches here is unknown
    return definition


def _is_tensor_call(ctx: RuleContext, call: ast.Call) -> bool:
    """A call of a torch function that returns a tensor (`torch.zeros`, `F.relu`, `T.cat`)."""
    qualname = ctx.sem.call_qualname(call)
    if qualname is None:
        return False
    if qualname.startswith(TENSOR_NAMESPACES):
        return not qualname.endswith(("_loss", "loss"))  # losses are tensors too, but keep it plain
    head, _, last = qualname.rpartition(".")
    if head != "torch":
        return False
    if last in NOT_TENSOR_FUNCTIONS or last[:1].isupper() and not last.endswith("Tensor"):
        return False
    return not last.startswith(("is_", "get_", "set_", "_"))


def _is_tensor_expr(
    ctx: RuleContext, expr: ast.AST, at: ast.AST, depth: int = 0, by_use: bool = True
) -> bool:
    """`expr` evaluates to a tensor, as far as this file shows: a torch factory or op, a model's
    output, tensor methods and arithmetic on those, a batch element from a DataLoader loop, a
    parameter annotated `Tensor` or (with `by_use`) used as one."""
    if depth > 4:
        return False
    sem = ctx.sem
    if isinstance(expr, ast.Call):
        if _is_tensor_call(ctx, expr):
            return True
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in TENSOR_METHODS:
            return _is_tensor_expr(ctx, func.value, at, depth + 1, by_use)
        return sem.kind_of(func) is ValueKind.MODEL and _is_module_instance(ctx, func)
    if isinstance(expr, ast.BinOp):
        return _is_tensor_expr(ctx, expr.left, at, depth + 1, by_use) or _is_tensor_expr(
            ctx, expr.right, at, depth + 1, by_use
        )
    if isinstance(expr, ast.UnaryOp):
        return _is_tensor_expr(ctx, expr.operand, at, depth + 1, by_use)
    if isinstance(expr, ast.Compare):
        return any(
            _is_tensor_expr(ctx, side, at, depth + 1, by_use)
            for side in (expr.left, *expr.comparators)
        )
    if isinstance(expr, ast.Subscript):
        return _is_tensor_expr(ctx, expr.value, at, depth + 1, by_use)
    if isinstance(expr, ast.Attribute):
        if expr.attr in ("T", "mT", "H", "mH", "grad", "real", "imag"):
            return _is_tensor_expr(ctx, expr.value, at, depth + 1, by_use)
        return _attribute_holds_tensor(ctx, expr, at)
    if isinstance(expr, ast.Name):
        return _name_holds_tensor(ctx, expr.id, at, depth, by_use)
    return False


def _is_module_instance(ctx: RuleContext, func: ast.AST) -> bool:
    """`model(x)`: the callee is a model (an instance), not an `nn.Linear` class being built."""
    qualname = ctx.sem.qualname(func)
    if qualname is not None:
        return False
    dotted = ctx.sem.dotted(func)
    return dotted is not None and dotted not in ctx.sem.module_classes


def _attribute_holds_tensor(ctx: RuleContext, expr: ast.Attribute, at: ast.AST) -> bool:
    """`self.mean` assigned only from torch tensor factories in this file. The assignment
    being evaluated does not count: `ds.targets = torch.tensor(ds.targets)` says nothing about
    what `ds.targets` held before it."""
    dotted = ctx.sem.dotted(expr)
    if dotted is None or ctx.sem.kinds.get(dotted) is not None:
        return False
    around = {id(node) for node in ctx.sem.ancestors(at)} | {id(at)}
    values = [v for v in ctx.sem.assigned_values(dotted) if id(v) not in around]
    return bool(values) and all(
        isinstance(v, ast.Call) and _is_tensor_call(ctx, v) for v in values
    )


def _name_holds_tensor(
    ctx: RuleContext, name: str, at: ast.AST, depth: int, by_use: bool = True
) -> bool:
    sem = ctx.sem
    if sem.kinds.get(name) is not None:
        return False
    definition = _reaching(ctx, name, at)
    if definition is None:
        return False
    node = definition.node
    if isinstance(node, ast.For | ast.AsyncFor):
        return _is_batch_element(ctx, node, name)
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return _parameter_is_tensor(ctx, node, name, by_use)
    if definition.value is None or not isinstance(node, ast.Assign | ast.AnnAssign):
        return False
    if _unpacks_loader_batch(ctx, node, name):
        return True
    value = _element_for(node, name, definition.value)
    if value is None:
        return False
    return _is_tensor_expr(ctx, value, node, depth + 1, by_use)


def _unpacks_loader_batch(ctx: RuleContext, node: ast.Assign | ast.AnnAssign, name: str) -> bool:
    """`x, y = batch` where `batch` is a whole item of a DataLoader loop: the default collate
    turned each field into a tensor."""
    if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Name):
        return False
    if not any(
        isinstance(target, ast.Tuple | ast.List)
        and any(isinstance(e, ast.Name) and e.id == name for e in target.elts)
        for target in node.targets
    ):
        return False
    batch = _reaching(ctx, node.value.id, node)
    return (
        batch is not None
        and isinstance(batch.node, ast.For | ast.AsyncFor)
        and _is_whole_batch(ctx, batch.node, node.value.id)
    )


def _is_whole_batch(ctx: RuleContext, loop: ast.For | ast.AsyncFor, name: str) -> bool:
    """`batch` in `for batch in loader` / `for i, batch in enumerate(loader)`."""
    iterable, target = _loader_and_target(loop)
    return (
        isinstance(target, ast.Name)
        and target.id == name
        and ctx.sem.kind_of(iterable) is ValueKind.LOADER
        and _collates_by_default(ctx, iterable)
    )


def _loader_and_target(loop: ast.For | ast.AsyncFor) -> tuple[ast.AST, ast.AST]:
    """The loader and the loop target an item of it binds, through `enumerate` and progress
    bars (`for i, (x, y) in enumerate(tqdm(loader))` → `loader`, `(x, y)`)."""
    iterable, target = loop.iter, loop.target
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name):
        enumerated = isinstance(target, ast.Tuple) and target.elts and iterable.args
        if iterable.func.id == "enumerate" and enumerated:
            iterable, target = iterable.args[0], target.elts[-1]  # type: ignore[union-attr]
    while isinstance(iterable, ast.Call) and iterable.args and _is_progress_wrapper(iterable):
        iterable = iterable.args[0]
    return iterable, target


def _collates_by_default(ctx: RuleContext, loader: ast.AST) -> bool:
    """No `collate_fn=` on the DataLoader this file builds for `loader`: a custom collate may
    hand out lists, strings or anything else."""
    dotted = ctx.sem.dotted(loader)
    if dotted is None:
        return False
    # answered once per name and file: a shared loader name (`train_loader`) is asked about at
    # every loop over it, and each question would scan all of its assignments again
    answers: dict[str, bool] = ctx.sem.derived.setdefault("layout:collates_by_default", {})
    answer = answers.get(dotted)
    if answer is None:
        answer = answers[dotted] = not any(
            isinstance(value, ast.Call) and any(k.arg == "collate_fn" for k in value.keywords)
            for value in ctx.sem.assigned_values(dotted)
        )
    return answer


def _element_for(node: ast.Assign | ast.AnnAssign, name: str, value: ast.AST) -> ast.AST | None:
    """The part of `value` that `name` receives (`a, b = f(x), g(x)` → `g(x)` for `b`)."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for target in targets:
        if isinstance(target, ast.Name) and target.id == name:
            return value
        if isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List):
            for element, part in zip(target.elts, value.elts, strict=False):
                if isinstance(element, ast.Name) and element.id == name:
                    return part
    return None


def _is_batch_element(ctx: RuleContext, loop: ast.For | ast.AsyncFor, name: str) -> bool:
    """`x` in `for x, y in loader` / `for i, (x, y) in enumerate(tqdm(loader))`: the default
    collate gives tensors. A whole `batch` may be a dict or a graph object: not claimed."""
    iterable, target = _loader_and_target(loop)
    if ctx.sem.kind_of(iterable) is not ValueKind.LOADER or not _collates_by_default(
        ctx, iterable
    ):
        return False
    return isinstance(target, ast.Tuple | ast.List) and any(
        isinstance(element, ast.Name) and element.id == name for element in target.elts
    )


def _is_progress_wrapper(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in ("tqdm", "track", "enumerate", "iter")


def _parameter_is_tensor(
    ctx: RuleContext, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str, by_use: bool
) -> bool:
    """A parameter annotated `Tensor`, or (with `by_use`) used as one in the function body."""
    arguments = function.args
    for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
        if arg.arg == name and arg.annotation is not None:
            annotation = ctx.sem.qualname(arg.annotation) or ctx.sem.dotted(arg.annotation) or ""
            return annotation.endswith("Tensor")
    return by_use and _used_as_tensor(ctx, function, name)


def _used_as_tensor(
    ctx: RuleContext, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str
) -> bool:
    for node in ast.walk(function):
        if not (isinstance(node, ast.Name) and node.id == name):
            continue
        parent = ctx.sem.parent(node)
        if isinstance(parent, ast.Attribute) and parent.value is node:
            if parent.attr in TENSOR_ATTRIBUTES:
                return True
            grand = ctx.sem.parent(parent)
            if parent.attr in TENSOR_USE_METHODS and isinstance(grand, ast.Call):
                return grand.func is parent
        if (
            isinstance(parent, ast.Call)
            and node in parent.args
            and _is_tensor_call(ctx, parent)
            and ctx.sem.call_qualname(parent) not in TENSOR_CONSTRUCTORS
        ):
            return True
    return False


def _int_constant(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
    ):
        return -node.operand.value
    return None


# ---- TD201 ---------------------------------------------------------------------------------
SWAPPING_METHODS = ("transpose", "swapaxes", "swapdims")
MOVING_METHODS = ("movedim", "moveaxis")
TRANSPOSED_ATTRIBUTES = ("T", "mT", "H", "mH")
SHAPE_KEEPING_METHODS = (
    "contiguous", "float", "half", "double", "to", "cuda", "cpu", "detach", "clone",
    "requires_grad_",
)


@rule(
    "TD201",
    "view-after-transpose",
    Severity.ERROR,
    "`.view()` that merges dimensions of a transposed/permuted/expanded tensor.",
    fixable=True,
)
def view_after_transpose(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.sem.method_calls("view"):
        receiver = call.func.value  # type: ignore[attr-defined]
        view_rank = _view_rank(ctx, call)
        if view_rank is None:
            continue
        source = _layout_source(ctx, receiver, call)
        if source is None:
            continue
        op, boundaries = source
        if view_rank > boundaries:
            continue  # enough output dimensions to keep every seam: a split or a same-rank view
        message = (
            f"`.view()` on the result of `{op}` merges dimensions that are no longer adjacent "
            "in memory: it raises \"view size is not compatible with input tensor's size and "
            "stride\"; insert `.contiguous()` before `.view()` (or use `.reshape()`)"
        )
        fix = Fix(
            "Insert `.contiguous()` before `.view()`",
            (_insert_contiguous(ctx, receiver),),
        )
        yield ctx.finding("TD201", call, message, fix)


def _insert_contiguous(ctx: RuleContext, receiver: ast.AST) -> Edit:
    """`.contiguous()` right after the receiver, attached to the `.` of `.view` that follows so
    the edit never touches a name."""
    span = ctx.doc.span_of(receiver)
    line = ctx.doc.index.line(span.end_line)
    rest = line[span.end_col :]
    if rest.lstrip().startswith("."):
        dot = span.end_col + len(rest) - len(rest.lstrip())
        return Edit(Span(span.end_line, dot, span.end_line, dot + 1), ".contiguous().")
    return Edit(Span(span.end_line, span.end_col, span.end_line, span.end_col), ".contiguous()")


def _view_rank(ctx: RuleContext, call: ast.Call) -> int | None:
    """How many dimensions `.view(...)` asks for, when it is clear (`view(B, -1)` → 2); None for
    `view(dtype)`, `view(shape)`, `view(*shape)`."""
    if call.keywords or not call.args:
        return None
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    if len(call.args) == 1:
        only = call.args[0]
        if isinstance(only, ast.Tuple | ast.List):
            if any(isinstance(e, ast.Starred) for e in only.elts):
                return None
            return len(only.elts)
        return 1 if _is_size_expression(ctx, only) else None
    return len(call.args)


def _is_size_expression(ctx: RuleContext, node: ast.AST) -> bool:
    """An integer-looking expression: `-1`, `B * T`, `x.size(0)`, `x.numel()`, `len(x)`."""
    if _int_constant(node) is not None:
        return True
    if isinstance(node, ast.BinOp):
        return _is_size_expression(ctx, node.left) or _is_size_expression(ctx, node.right)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "size" and node.args:
            return True
        if isinstance(func, ast.Attribute) and func.attr == "numel":
            return True
        return isinstance(func, ast.Name) and func.id in ("len", "int")
    if isinstance(node, ast.Subscript):
        value = node.value
        return isinstance(value, ast.Attribute) and value.attr == "shape"
    return False


def _layout_source(
    ctx: RuleContext, receiver: ast.AST, at: ast.AST
) -> tuple[str, int] | None:
    """(the op, how many dimension seams it leaves that a view cannot merge across) when the
    receiver is a transposed/permuted/expanded/narrowed tensor (directly or via a name)."""
    if isinstance(receiver, ast.Name):
        definition = _reaching(ctx, receiver.id, at)
        if definition is None or not isinstance(definition.node, ast.Assign):
            return None
        if len(definition.node.targets) != 1 or not isinstance(
            definition.node.targets[0], ast.Name
        ):
            return None
        return _layout_source_expr(ctx, definition.value, definition.node)
    return _layout_source_expr(ctx, receiver, at)


def _layout_source_expr(
    ctx: RuleContext, expr: ast.AST | None, at: ast.AST
) -> tuple[str, int] | None:
    if isinstance(expr, ast.Attribute) and expr.attr in TRANSPOSED_ATTRIBUTES:
        return f".{expr.attr}", 1
    if not isinstance(expr, ast.Call):
        return None
    func = expr.func
    qualname = ctx.sem.call_qualname(expr) or ""
    if isinstance(func, ast.Attribute) and not qualname.startswith("torch."):
        method, subject, args = func.attr, func.value, list(expr.args)
    elif qualname.startswith("torch.") and expr.args:
        method, subject, args = qualname.rsplit(".", 1)[-1], expr.args[0], list(expr.args[1:])
    else:
        return None
    if expr.keywords:
        return None
    if _may_be_permuted(ctx, subject, at, 0):
        return None  # the seams depend on a layout we cannot see: `transpose` may undo it
    known_rank = _rank_of(ctx, subject, at, 0)
    if method in SWAPPING_METHODS and len(args) == 2:
        dims = [_int_constant(a) for a in args]
        if None in dims:
            return None
        first, second = dims  # type: ignore[misc]
        permutation = _swap_permutation(first, second, known_rank)  # type: ignore[arg-type]
        op = f".{method}({first}, {second})"
    elif method == "permute":
        dims = _permute_dims(args)
        if dims is None:
            return None
        permutation = _normalise(dims, len(dims))
        op = ".permute(...)"
    elif method == "t" and not args:
        permutation, op = [1, 0], ".t()"
    elif method in MOVING_METHODS and len(args) == 2:
        source, destination = (_int_constant(a) for a in args)
        if source is None or destination is None:
            return None
        permutation = _move_permutation(source, destination, known_rank)
        op = f".{method}({source}, {destination})"
    elif method == "expand":
        return _expand_seams(ctx, subject, args, at)
    elif method == "narrow" and len(args) == 3:
        dim = _int_constant(args[0])
        if dim is None or dim < 1:
            return None
        return f".narrow({dim}, ...)", 1
    else:
        return None
    if permutation is None:
        return None
    return op, _seams(permutation)


LAYOUT_CHANGING_METHODS = frozenset(
    {*SWAPPING_METHODS, *MOVING_METHODS, "permute", "t", "expand", "expand_as", "narrow",
     "as_strided"}
)


def _may_be_permuted(ctx: RuleContext, expr: ast.AST, at: ast.AST, depth: int) -> bool:
    """`expr` may itself be a transposed/permuted view (then a further transpose can make it
    contiguous again): it comes, through ops that keep the memory layout (views, elementwise
    ops, `F.scaled_dot_product_attention`, which keeps the query's layout), from a layout-
    changing op. A matmul, a factory, a submodule's output or an unknown input count as
    contiguous, the usual case."""
    if depth > 8:
        return True
    if isinstance(expr, ast.Attribute):
        return expr.attr in TRANSPOSED_ATTRIBUTES
    if isinstance(expr, ast.BinOp):
        if isinstance(expr.op, ast.MatMult):
            return False
        return any(_may_be_permuted(ctx, side, at, depth + 1) for side in (expr.left, expr.right))
    if isinstance(expr, ast.Subscript):
        return True  # slicing can leave any layout
    if isinstance(expr, ast.Name):
        definition = _reaching(ctx, expr.id, at)
        if definition is None or not isinstance(definition.node, ast.Assign):
            return False
        if definition.value is None:
            return False
        value = _element_for(definition.node, expr.id, definition.value)
        return value is not None and _may_be_permuted(ctx, value, definition.node, depth + 1)
    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    qualname = ctx.sem.call_qualname(expr) or ""
    if qualname.startswith("torch."):
        name = qualname.rsplit(".", 1)[-1]
        if name in LAYOUT_CHANGING_METHODS:
            return True
        if qualname in RANK_KEEPING_FUNCTIONS and expr.args:
            return _may_be_permuted(ctx, expr.args[0], at, depth + 1)
        return False
    if isinstance(func, ast.Attribute):
        if func.attr in LAYOUT_CHANGING_METHODS:
            return True
        if func.attr == "contiguous":
            return False
        if func.attr in RANK_KEEPING_METHODS or func.attr in ("view", "reshape"):
            return _may_be_permuted(ctx, func.value, at, depth + 1)
    return False


def _permute_dims(args: list[ast.expr]) -> list[int] | None:
    if len(args) == 1 and isinstance(args[0], ast.Tuple | ast.List):
        args = list(args[0].elts)
    dims = [_int_constant(a) for a in args]
    if not dims or None in dims:
        return None
    return dims  # type: ignore[return-value]


def _normalise(dims: list[int], rank: int) -> list[int] | None:
    normalised = [d + rank if d < 0 else d for d in dims]
    if sorted(normalised) != list(range(rank)):
        return None
    return normalised


def _swap_permutation(first: int, second: int, known_rank: int | None) -> list[int] | None:
    needed = max(first + 1 if first >= 0 else -first, second + 1 if second >= 0 else -second, 2)
    rank = known_rank if known_rank is not None and known_rank >= needed else needed
    a, b = (first + rank if first < 0 else first), (second + rank if second < 0 else second)
    permutation = list(range(rank))
    permutation[a], permutation[b] = permutation[b], permutation[a]
    return permutation


def _move_permutation(source: int, destination: int, known_rank: int | None) -> list[int]:
    needed = max(
        source + 1 if source >= 0 else -source,
        destination + 1 if destination >= 0 else -destination,
    )
    rank = known_rank if known_rank is not None and known_rank >= needed else needed
    s = source + rank if source < 0 else source
    d = destination + rank if destination < 0 else destination
    order = [i for i in range(rank) if i != s]
    order.insert(d, s)
    return order


def _seams(permutation: list[int]) -> int:
    """Adjacent output dimensions that are not adjacent, in order, in memory: a view cannot
    merge across them, so it needs more than this many output dimensions."""
    return sum(1 for a, b in zip(permutation, permutation[1:], strict=False) if b != a + 1)


def _expand_seams(
    ctx: RuleContext, subject: ast.AST, args: list[ast.expr], at: ast.AST
) -> tuple[str, int] | None:
    """`x.unsqueeze(d).expand(...)`: the expanded dimension has stride 0 and cannot be merged
    with its neighbours."""
    if not (
        isinstance(subject, ast.Call)
        and isinstance(subject.func, ast.Attribute)
        and subject.func.attr == "unsqueeze"
        and len(subject.args) == 1
    ):
        return None
    dim = _int_constant(subject.args[0])
    if dim is None or any(isinstance(a, ast.Starred) for a in args) or len(args) < 2:
        return None
    rank = len(args)
    dim = dim + rank if dim < 0 else dim
    if not 0 <= dim < rank or _int_constant(args[dim]) in (1, -1):
        return None
    return ".expand(...)", int(dim > 0) + int(dim < rank - 1)


def _rank_of(ctx: RuleContext, expr: ast.AST, at: ast.AST, depth: int) -> int | None:
    """The number of dimensions of `expr` when the file states it (`x.view(B, T, H, D)`,
    `torch.randn(2, 3, 4)`), else None."""
    if depth > 8:
        return None
    if isinstance(expr, ast.Name):
        definition = _reaching(ctx, expr.id, at)
        if definition is None or not isinstance(definition.node, ast.Assign):
            return None
        if definition.value is None:
            return None
        value = _element_for(definition.node, expr.id, definition.value)
        return _rank_of(ctx, value, definition.node, depth + 1) if value is not None else None
    if isinstance(expr, ast.BinOp):
        # broadcasting gives the larger rank; taking the one we know can only under-count,
        # which makes the rule quieter, never louder
        ranks = [_rank_of(ctx, side, at, depth + 1) for side in (expr.left, expr.right)]
        known = [r for r in ranks if r is not None]
        return max(known) if known else None
    if not isinstance(expr, ast.Call):
        return None
    func = expr.func
    qualname = ctx.sem.call_qualname(expr) or ""
    if qualname in RANK_KEEPING_FUNCTIONS and expr.args:
        return _rank_of(ctx, expr.args[0], at, depth + 1)
    if qualname in ("torch.randn", "torch.rand", "torch.zeros", "torch.ones", "torch.empty"):
        if expr.args and all(_is_size_expression(ctx, a) or isinstance(a, ast.Name)
                             for a in expr.args):
            if len(expr.args) == 1 and isinstance(expr.args[0], ast.Name):
                return None
            return len(expr.args)
        return None
    if not isinstance(func, ast.Attribute):
        return None
    if func.attr in ("view", "reshape"):
        return _view_rank_loose(expr)
    if func.attr == "permute":
        dims = _permute_dims(list(expr.args))
        return len(dims) if dims is not None else None
    if func.attr in RANK_KEEPING_METHODS or func.attr in SWAPPING_METHODS:
        return _rank_of(ctx, func.value, at, depth + 1)
    if func.attr == "unsqueeze":
        inner = _rank_of(ctx, func.value, at, depth + 1)
        return inner + 1 if inner is not None else None
    return None


def _view_rank_loose(call: ast.Call) -> int | None:
    if call.keywords or not call.args or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    if len(call.args) == 1:
        only = call.args[0]
        if isinstance(only, ast.Tuple | ast.List):
            return len(only.elts)
        return 1 if _int_constant(only) is not None else None
    return len(call.args)


RANK_KEEPING_METHODS = frozenset(
    {
        *SHAPE_KEEPING_METHODS, "masked_fill", "softmax", "log_softmax", "type_as", "exp",
        "sigmoid", "tanh", "relu", "abs", "neg", "pow", "mul", "add", "div", "sub",
    }
)
RANK_KEEPING_FUNCTIONS = frozenset(
    {
        *(
            f"torch.nn.functional.{name}"
            for name in (
                "softmax", "log_softmax", "dropout", "scaled_dot_product_attention", "relu",
                "gelu", "silu", "layer_norm", "normalize",
            )
        ),
        "torch.softmax", "torch.tanh", "torch.sigmoid", "torch.relu", "torch.exp", "torch.abs",
        "torch.masked_fill",
    }
)


# ---- TD202 ---------------------------------------------------------------------------------
NUMPY_FLOAT_RANDOM = frozenset(
    {
        "rand", "randn", "random", "random_sample", "ranf", "sample", "uniform", "normal",
        "standard_normal", "exponential", "gamma", "beta", "lognormal", "laplace", "logistic",
        "chisquare", "standard_cauchy", "standard_t", "triangular", "standard_exponential",
        "standard_gamma", "multivariate_normal", "dirichlet", "rayleigh", "weibull", "pareto",
    }
)
NUMPY_FLOAT_FACTORIES = frozenset({"zeros", "ones", "empty", "eye", "identity"})
NUMPY_FLOAT_ALWAYS = frozenset({"linspace", "logspace", "geomspace", "loadtxt", "genfromtxt"})
FLOAT64_SPELLINGS = frozenset(
    {"numpy.float64", "numpy.double", "float", "float64", "double", "f8", "torch.float64",
     "torch.double"}
)
DTYPE_KEEPING_METHODS = frozenset(
    {
        "to", "cuda", "cpu", "unsqueeze", "squeeze", "view", "reshape", "permute", "transpose",
        "contiguous", "clone", "detach", "requires_grad_", "pin_memory", "flatten", "t",
    }
)
TENSOR_FROM_NUMPY = ("torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.asarray")


@rule(
    "TD202",
    "float64-leak",
    Severity.ERROR,
    "A float64 tensor (from numpy or `.double()`) fed to a float32 model.",
    fixable=True,
)
def float64_leak(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    if any(True for _ in sem.calls_to("torch.set_default_dtype", "torch.set_default_tensor_type")):
        return
    if _has_float64_model(ctx):
        return
    reported: set[int] = set()
    for call in sem.calls:
        if not call.args or sem.kind_of(call.func) is not ValueKind.MODEL:
            continue
        if not _is_module_instance(ctx, call.func):
            continue
        for argument in call.args:
            source = _float64_source(ctx, argument, call, 0)
            if source is None or id(source) in reported:
                continue
            reported.add(id(source))
            model = ctx.doc.source_of(call.func)
            yield _float64_finding(ctx, source, model)


def _float64_finding(ctx: RuleContext, source: ast.Call, model: str) -> Finding:
    is_double = isinstance(source.func, ast.Attribute) and source.func.attr == "double"
    origin = "`.double()`" if is_double else "a float64 numpy array"
    message = (
        f"this tensor is float64 ({origin}) and goes into `{model}`, whose weights are float32: "
        "the first layer raises \"mat1 and mat2 must have the same dtype, but got Double and "
        "Float\" (a convolution: \"Input type (double) and bias type (float) should be the "
        "same\"); convert it with `.float()`"
    )
    if is_double:
        attribute = ctx.doc.span_of(source.func)
        name = Span(attribute.end_line, attribute.end_col - len("double"), attribute.end_line,
                    attribute.end_col + 1)
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
        separator = ", " if not ctx.doc.text_in(
            Span(span.start_line, span.start_col, span.end_line, span.end_col - 1)
        ).rstrip().endswith(",") else " "
        return Fix(
            f"Add `dtype={alias}.float32`",
            (Edit(closing, f"{separator}dtype={alias}.float32)"),),
        )
    span = ctx.doc.span_of(call)
    closing = Span(span.end_line, span.end_col - 1, span.end_line, span.end_col)
    return Fix("Append `.float()`", (Edit(closing, ").float()"),))


def _has_float64_model(ctx: RuleContext) -> bool:
    """The file converts a model to float64 (`model.double()`, `net.to(torch.float64)`)."""
    sem = ctx.sem
    for attr in ("double", "to", "type"):
        for call in sem.method_calls(attr):
            receiver = call.func.value  # type: ignore[attr-defined]
            is_model = (
                sem.kind_of(receiver) is ValueKind.MODEL
                or (isinstance(receiver, ast.Name) and receiver.id == "self")
                or (isinstance(receiver, ast.Call) and _builds_module(ctx, receiver))
            )
            if not is_model:
                continue
            if attr == "double":
                return True
            values = [*call.args, *(k.value for k in call.keywords)]
            if any(_spells_float64(ctx, v) for v in values):
                return True
    return False


def _builds_module(ctx: RuleContext, call: ast.Call) -> bool:
    """`nn.Linear(10, 1)`, `Net()`, `model.to(device)`: an expression that makes a module."""
    sem = ctx.sem
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
            return _builds_module(ctx, receiver)
        return sem.kind_of(receiver) is ValueKind.MODEL
    return False


def _spells_float64(ctx: RuleContext, node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in FLOAT64_SPELLINGS
    if isinstance(node, ast.Name) and node.id == "float":
        return True
    name = ctx.sem.qualname(node) or ""
    return name in FLOAT64_SPELLINGS or name.endswith("DoubleTensor")


def _float64_source(
    ctx: RuleContext, expr: ast.AST, at: ast.AST, depth: int
) -> ast.Call | None:
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
        if func.attr == "to" and not all(_is_device_like(ctx, a) for a in expr.args):
            return None
        if any(k.arg in ("dtype",) for k in expr.keywords):
            return None
        return _float64_source(ctx, func.value, at, depth + 1)
    if isinstance(expr, ast.Subscript):
        return _float64_source(ctx, expr.value, at, depth + 1)
    if isinstance(expr, ast.Name):
        definition = _reaching(ctx, expr.id, at)
        if definition is None or not isinstance(definition.node, ast.Assign | ast.AnnAssign):
            return None
        if definition.value is None:
            return None
        value = _element_for(definition.node, expr.id, definition.value)
        if value is None:
            return None
        return _float64_source(ctx, value, definition.node, depth + 1)
    return None


def _is_device_like(ctx: RuleContext, node: ast.AST) -> bool:
    """`device`, `"cuda"`, `x.device`, `torch.device(...)`, `args.device`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.split(":")[0] in ("cuda", "cpu", "mps", "xpu", "meta")
    if isinstance(node, ast.Call):
        return ctx.sem.call_qualname(node) == "torch.device"
    dotted = ctx.sem.dotted(node)
    return dotted is not None and "device" in dotted.rsplit(".", 1)[-1].lower()


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
                return _spells_float64(ctx, expr.args[0])
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
        return other is not None and isinstance(other, ast.Constant) and isinstance(
            other.value, int | float
        )
    if isinstance(expr, ast.Subscript):
        return _is_numpy_float64(ctx, expr.value, at, depth + 1)
    if isinstance(expr, ast.Name):
        definition = _reaching(ctx, expr.id, at)
        if definition is None or not isinstance(definition.node, ast.Assign | ast.AnnAssign):
            return False
        if definition.value is None:
            return False
        value = _element_for(definition.node, expr.id, definition.value)
        return value is not None and _is_numpy_float64(ctx, value, definition.node, depth + 1)
    return False


def _numpy_call_is_float64(ctx: RuleContext, call: ast.Call, qualname: str) -> bool:
    last = qualname.rsplit(".", 1)[-1]
    dtype = next((k.value for k in call.keywords if k.arg == "dtype"), None)
    if dtype is not None:
        return _spells_float64(ctx, dtype)
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
            if _int_constant(element) is None:
                return False
    return found


def _is_numpy_generator(ctx: RuleContext, expr: ast.AST, at: ast.AST) -> bool:
    """`np.random.default_rng(...)` or a name bound to one."""
    if isinstance(expr, ast.Call):
        return ctx.sem.call_qualname(expr) == "numpy.random.default_rng"
    if isinstance(expr, ast.Name):
        definition = _reaching(ctx, expr.id, at)
        return (
            definition is not None
            and isinstance(definition.value, ast.Call)
            and ctx.sem.call_qualname(definition.value) == "numpy.random.default_rng"
        )
    return False


# ---- TD203 ---------------------------------------------------------------------------------
MOVING_OR_CASTING = (
    "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "long", "int", "bool",
)


@rule(
    "TD203",
    "discarded-to",
    Severity.WARNING,
    "`x.to(device)` / `x.cuda()` / `x.float()` as a statement on a tensor: the result is lost.",
    fixable=True,
)
def discarded_to(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for attr in MOVING_OR_CASTING:
        for call in sem.method_calls(attr):
            statement = sem.parent(call)
            if not isinstance(statement, ast.Expr):
                continue
            receiver = call.func.value  # type: ignore[attr-defined]
            if not isinstance(receiver, ast.Name | ast.Attribute) or not _is_clear_tensor(
                ctx, receiver, call
            ):
                continue
            name = ctx.doc.source_of(receiver)
            method = ctx.doc.source_of(call)[len(name) :].lstrip()
            message = (
                f"`{name}{method}` returns a new tensor and the result is dropped: unlike a "
                f"module, a tensor is not moved or converted in place, so `{name}` is unchanged; "
                f"assign it: `{name} = {name}{method}`"
            )
            fix = Fix(
                f"Assign the result to `{name}`",
                (Edit(_start_of(ctx, call), f"{name} = "),),
            )
            yield ctx.finding("TD203", call, message, fix)


def _start_of(ctx: RuleContext, node: ast.AST) -> Span:
    span = ctx.doc.span_of(node)
    return Span(span.start_line, span.start_col, span.start_line, span.start_col)


def _is_clear_tensor(ctx: RuleContext, receiver: ast.AST, at: ast.AST) -> bool:
    """Only what is clearly a tensor: never a model, a loss module or anything of unknown kind
    (`model.to(device)` as a statement is right: modules move in place)."""
    sem = ctx.sem
    if sem.kind_of(receiver) is not None:
        return False
    dotted = sem.dotted(receiver)
    if dotted is None or dotted in ("self", "cls"):
        return False
    if dotted in sem.module_classes:
        return False
    return _is_tensor_expr(ctx, receiver, at)


# ---- TD204 ---------------------------------------------------------------------------------
CPU_FACTORIES = tuple(
    f"torch.{name}"
    for name in (
        "zeros", "ones", "empty", "full", "arange", "randn", "rand", "randint", "randperm",
        "eye", "linspace", "logspace", "tensor",
    )
)
MOVING_METHODS_FOR_DEVICE = ("to", "cuda", "type_as", "to_device")
MIXING_FUNCTIONS = (
    "torch.cat", "torch.stack", "torch.where", "torch.matmul", "torch.bmm", "torch.mm",
    "torch.einsum", "torch.maximum", "torch.minimum", "torch.add", "torch.mul", "torch.max",
    "torch.min", "torch.masked_fill", "torch.gather",
)
MIXING_METHODS = (
    "masked_fill", "masked_fill_", "add", "add_", "mul", "mul_", "sub", "div", "matmul",
    "bmm", "gather", "scatter", "scatter_add", "index_add", "where", "expand_as", "lt", "gt",
    "le", "ge", "eq", "ne", "copy_", "masked_scatter",
)


@rule(
    "TD204",
    "device-less-tensor-in-forward",
    Severity.WARNING,
    "A tensor created in `forward()` without `device=` and mixed with the inputs.",
    fixable=True,
)
def device_less_tensor_in_forward(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    forwards = {
        id(item): item
        for cls in sem.module_classes.values()
        for item in cls.body
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == "forward"
    }
    if not forwards:
        return
    for call in sem.calls_to(*CPU_FACTORIES):
        function = sem.enclosing_function(call)
        if function is None or id(function) not in forwards:
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
            "\"Expected all tensors to be on the same device\"; create it on the input's device"
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
    """The forward's tensor inputs and the names computed from them (not their sizes)."""
    arguments = function.args
    names = {
        a.arg
        for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        if a.arg not in ("self", "cls")
    }
    for node in ast.walk(function):
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
        pending.extend(ast.iter_child_nodes(node))
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
    for node in ast.walk(function):
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
            and _is_tensor_call(ctx, parent)
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
    if _used_as_tensor(ctx, function, name):
        return True
    for node in ast.walk(function):
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


# ---- TD205 ---------------------------------------------------------------------------------
SYNC_METHODS = ("item", "cpu", "numpy", "tolist")


@rule(
    "TD205",
    "host-sync-in-loop",
    Severity.INFORMATION,
    "`.item()`, `.cpu()`, `.numpy()`, `.tolist()` or `print(tensor)` on every training step.",
    fixable=True,
    # on real code a per-step sync is mostly a logging call whose cost the step's other work
    # hides (see the doc page): too noisy to be on by default
    enabled_by_default=False,
)
def host_sync_in_loop(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    # on the CPU a sync costs nothing: speak only where the file shows an accelerator
    if not _training_loops(ctx) or not targets_accelerator(sem):
        return
    for attr in SYNC_METHODS:
        for call in sem.method_calls(attr):
            if call.args and attr != "cpu":
                continue
            receiver = call.func.value  # type: ignore[attr-defined]
            if attr == "cpu" and sem.kind_of(receiver) is not None:
                continue  # `model.cpu()`
            if _inside_sync_chain(ctx, call):
                continue  # `x.cpu().numpy()`: reported once, at the outer call
            if _sync_receiver(receiver) is None or not _unsynced_step_loop(ctx, call):
                continue
            if not _checked_right_away(ctx, call):
                text = ctx.doc.source_of(call)
                message = (
                    f"`{text}` copies a value to the host on every training step, which waits "
                    "for all queued GPU work to finish; accumulate on the device (`.detach()`) "
                    "and convert every N steps"
                )
                yield ctx.finding("TD205", call, message, _detach_fix(ctx, call, attr))
    for call in sem.calls:
        if not (isinstance(call.func, ast.Name) and call.func.id == "print"):
            continue
        loop = _step_loop(ctx, call)
        if loop is None or syncs_on_every_step(sem, loop):
            continue
        shown = _printed_tensor(ctx, call, loop)
        if shown is None:
            continue
        message = (
            f"printing the tensor `{shown}` on every training step copies it to the host and "
            "waits for the GPU; print every N steps, or accumulate with `.detach()`"
        )
        yield ctx.finding("TD205", call, message)


def _unsynced_step_loop(ctx: RuleContext, call: ast.Call) -> bool:
    """`call` runs on every step of a training loop that does not already wait for the GPU
    each iteration (a blocking copy of the batch to the device)."""
    loop = _step_loop(ctx, call)
    return loop is not None and not syncs_on_every_step(ctx.sem, loop)


def _checked_right_away(ctx: RuleContext, call: ast.Call) -> bool:
    """`loss_value = loss.item()` then `if not math.isfinite(loss_value): ...` in the same loop:
    the host needs the value on this step (a guard that stops training), so it cannot wait."""
    statement = ctx.sem.parent(call)
    if not (
        isinstance(statement, ast.Assign)
        and statement.value is call
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
    ):
        return False
    loops = ctx.sem.enclosing_loops(call)
    return bool(loops) and statement.targets[0].id in _names_tested_in(ctx, loops[0])


def _names_tested_in(ctx: RuleContext, loop: Loop) -> frozenset[str]:
    """The names read by the `if`/`while`/`assert` tests inside `loop`, collected once per loop."""
    cache = ctx.sem.derived.setdefault("layout:names-tested-in-loop", {})
    found = cache.get(id(loop))
    if found is None:
        names: set[str] = set()
        for node in ast.walk(loop):
            if isinstance(node, ast.If | ast.While | ast.Assert) and node is not loop:
                names.update(n.id for n in ast.walk(node.test) if isinstance(n, ast.Name))
        found = cache[id(loop)] = frozenset(names)
    return found


def _inside_sync_chain(ctx: RuleContext, call: ast.Call) -> bool:
    parent = ctx.sem.parent(call)
    if isinstance(parent, ast.Attribute) and parent.attr in SYNC_METHODS:
        grand = ctx.sem.parent(parent)
        return isinstance(grand, ast.Call) and grand.func is parent
    return False


def _sync_receiver(receiver: ast.AST) -> ast.AST | None:
    """Receivers that may be a device tensor (not a literal or a string)."""
    if isinstance(receiver, ast.Constant | ast.JoinedStr | ast.List | ast.Dict):
        return None
    return receiver


def _detach_fix(ctx: RuleContext, call: ast.Call, attr: str) -> Fix | None:
    """`total += loss.item()` → `total += loss.detach()` (the sum stays on the device)."""
    if attr != "item":
        return None
    statement = ctx.sem.parent(call)
    if not (
        isinstance(statement, ast.AugAssign)
        and isinstance(statement.op, ast.Add)
        and statement.value is call
    ):
        return None
    span = ctx.doc.span_of(call.func)
    dot = Span(span.end_line, span.end_col - len(attr) - 1, span.end_line, span.end_col + 1)
    return Fix(
        "Accumulate `.detach()` on the device instead of `.item()`",
        (Edit(dot, ".detach("),),
        safe=False,
    )


def _printed_tensor(ctx: RuleContext, call: ast.Call, loop: Loop) -> str | None:
    """A tensor printed whole (`print(loss)`, `print(f"{loss}")`), not via `.item()`."""
    candidates: list[ast.AST] = []
    for argument in call.args:
        if isinstance(argument, ast.JoinedStr):
            candidates.extend(
                v.value for v in argument.values if isinstance(v, ast.FormattedValue)
            )
        else:
            candidates.append(argument)
    for candidate in candidates:
        if isinstance(candidate, ast.Name) and _is_loss_name(ctx, candidate, loop):
            return candidate.id
    return None


def _is_loss_name(ctx: RuleContext, name: ast.Name, loop: Loop) -> bool:
    """Back-propagated in this loop (`loss.backward()`)."""
    for backward in training_of(ctx.sem).backward_calls:
        func = backward.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == name.id
            and loop in ctx.sem.enclosing_loops(backward)
        ):
            return True
    return False


# ---- TD206 ---------------------------------------------------------------------------------
HOST_TENSOR_FACTORIES = (
    "torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.zeros", "torch.ones",
    "torch.full", "torch.arange", "torch.linspace", "torch.eye", "torch.randn", "torch.rand",
    "torch.empty", "torch.FloatTensor", "torch.LongTensor", "torch.Tensor",
)


@rule(
    "TD206",
    "repeated-host-to-device",
    Severity.INFORMATION,
    "The same CPU tensor copied to the device on every training step.",
    fixable=True,
)
def repeated_host_to_device(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    if not _training_loops(ctx):
        return
    for attr in ("to", "cuda"):
        for call in sem.method_calls(attr):
            if attr == "to" and not (call.args or call.keywords):
                continue
            if attr == "to" and call.args and not _is_device_like(ctx, call.args[0]):
                continue
            loop = _step_loop(ctx, call)
            if loop is None:
                continue
            receiver = call.func.value  # type: ignore[attr-defined]
            if isinstance(receiver, ast.Name):
                finding = _invariant_name_move(ctx, call, receiver, loop)
            elif isinstance(receiver, ast.Call):
                finding = _constant_tensor_move(ctx, call, receiver, loop)
            else:
                finding = None
            if finding is not None:
                yield finding


def _bound_in_loop(ctx: RuleContext, name: str, loop: Loop) -> bool:
    flow = flow_of(ctx.sem, function_scope(ctx.sem, loop))
    for definition in flow.definitions.get(name, []):
        node = definition.node
        if node is loop or ctx.sem.in_loop(node, loop):
            return True
    return False


def _arguments_invariant(ctx: RuleContext, call: ast.Call, loop: Loop) -> bool:
    for argument in [*call.args, *(k.value for k in call.keywords)]:
        for node in ast.walk(argument):
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
    value = _element_for(definition.node, name, definition.value) if definition.value else None
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
        for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                  *(x for x in (arguments.vararg, arguments.kwarg) if x is not None)]
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
    edits = [ctx.insert_line_before(loop, f"{new_name} = {text}")]  # type: ignore[arg-type]
    for other in ctx.sem.method_calls(call.func.attr):  # type: ignore[attr-defined]
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
        "torch.tensor", "torch.as_tensor", "torch.zeros", "torch.ones", "torch.full",
        "torch.arange", "torch.linspace", "torch.eye", "torch.FloatTensor", "torch.LongTensor",
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
        d for d in flow_of(ctx.sem, function_scope(ctx.sem, loop)).definitions.get(name, [])
        if d.node is loop or ctx.sem.in_loop(d.node, loop)
    ]
    if len(bindings) != 1:
        return None
    return Fix(f"Create `{name}` once, before the loop", ctx.move_line_before(statement, loop))


# ---- TD207 ---------------------------------------------------------------------------------
@rule(
    "TD207",
    "tensor-from-tensor",
    Severity.WARNING,
    "`torch.tensor(t)` where `t` is already a tensor: a copy that warns and drops autograd.",
    fixable=True,
)
def tensor_from_tensor(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.sem.calls_to("torch.tensor"):
        if len(call.args) != 1:
            continue
        data = call.args[0]
        if isinstance(data, ast.List | ast.Tuple | ast.Constant | ast.ListComp | ast.Dict):
            continue
        if not _is_tensor_expr(ctx, data, call, by_use=False) or _guarded_by_isinstance(
            ctx, call, data
        ):
            continue
        text = ctx.operand_source(data)
        message = (
            f"`{ctx.doc.source_of(call.func)}({ctx.doc.source_of(data)})` copies a tensor that "
            "already exists: torch warns \"To copy construct from a tensor, it is recommended "
            "to use sourceTensor.detach().clone()\" and the copy loses the autograd history; "
            f"use `{text}.detach().clone()`"
        )
        yield ctx.finding("TD207", call, message, _clone_fix(ctx, call, text))


def _guarded_by_isinstance(ctx: RuleContext, call: ast.Call, data: ast.AST) -> bool:
    """`if not isinstance(x, torch.Tensor): x = torch.tensor(x)` (or `type(x) is list`): the
    author checked what `x` is."""
    name = ctx.sem.dotted(data)
    if name is None:
        return False
    for ancestor in ctx.sem.ancestors(call):
        if isinstance(ancestor, ast.If | ast.IfExp):
            for node in ast.walk(ancestor.test):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in ("isinstance", "type")
                    and node.args
                    and ctx.sem.dotted(node.args[0]) == name
                ):
                    return True
        if isinstance(ancestor, FUNCTION_NODES):
            break
    return False


def _clone_fix(ctx: RuleContext, call: ast.Call, text: str) -> Fix | None:
    conversions = []
    grad = ""
    for keyword in call.keywords:
        value = ctx.doc.source_of(keyword.value)
        if keyword.arg in ("dtype", "device"):
            conversions.append(f"{keyword.arg}={value}")
        elif keyword.arg == "requires_grad":
            grad = f".requires_grad_({value})"
        else:
            return None
    replacement = f"{text}.detach().clone()"
    if conversions:
        replacement += f".to({', '.join(conversions)})"
    replacement += grad
    return Fix(f"Use `{replacement}`", (ctx.replace(call, replacement),))

