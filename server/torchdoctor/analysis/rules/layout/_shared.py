"""What several of the layout rules share."""

from __future__ import annotations

import ast

from ...context import RuleContext
from ...dataflow import Definition, flow_of
from ...semantics import SCOPE_OR_MODULE_TYPES, Loop, Semantics, ValueKind, in_loop_body
from ...training import BRANCH_TYPES, function_scope, in_exclusive_branches, training_of
from ...tree_walk import walk

# Core candidates: "is this expression a tensor", "training loops (innermost loops around
# backward)" are asked by several families.

# torch.* callables that do not return a tensor (or may return anything)
NOT_TENSOR_FUNCTIONS = frozenset(
    {
        "device",
        "load",
        "compile",
        "Generator",
        "no_grad",
        "enable_grad",
        "inference_mode",
        "autocast",
        "set_grad_enabled",
        "manual_seed",
        "seed",
        "get_default_dtype",
        "Size",
        "is_tensor",
        "numel",
        "is_grad_enabled",
        "set_default_dtype",
        "save",
        "dtype",
        "get_rng_state",
        "set_rng_state",
        "finfo",
        "iinfo",
        "typename",
        "is_floating_point",
        "use_deterministic_algorithms",
        "set_num_threads",
        "get_num_threads",
        "broadcast_shapes",
        "unbind",
        "split",
        "chunk",
        "tensor_split",
        "meshgrid",
        "max",
        "min",
        "sort",
        "topk",
        "where",
        "unique",
        "nonzero",
        "svd",
        "qr",
        "eig",
        "lstsq",
        "histogram",
        "frexp",
        "aminmax",
        "std_mean",
        "var_mean",
        "kthvalue",
        "median",
        "mode",
    }
)
TENSOR_NAMESPACES = ("torch.nn.functional.", "torch.fft.", "torch.linalg.", "torch.special.")
# tensor methods that return a tensor (a method outside this list may return anything)
TENSOR_METHODS = frozenset(
    {
        "view",
        "reshape",
        "permute",
        "transpose",
        "t",
        "contiguous",
        "float",
        "double",
        "half",
        "bfloat16",
        "long",
        "int",
        "bool",
        "to",
        "cuda",
        "cpu",
        "detach",
        "clone",
        "unsqueeze",
        "squeeze",
        "flatten",
        "sum",
        "mean",
        "std",
        "var",
        "abs",
        "exp",
        "log",
        "sqrt",
        "pow",
        "softmax",
        "log_softmax",
        "argmax",
        "argmin",
        "masked_fill",
        "expand",
        "expand_as",
        "repeat",
        "gather",
        "index_select",
        "matmul",
        "mm",
        "bmm",
        "mul",
        "add",
        "sub",
        "div",
        "sigmoid",
        "tanh",
        "relu",
        "clamp",
        "round",
        "floor",
        "ceil",
        "norm",
        "sign",
        "neg",
        "cumsum",
        "type_as",
        "narrow",
        "select",
        "view_as",
        "reshape_as",
        "logical_not",
        "requires_grad_",
        "pin_memory",
        "square",
        "prod",
        "all",
        "any",
        "eq",
        "ne",
        "gt",
        "lt",
    }
)
TENSOR_ATTRIBUTES = ("shape", "dtype", "device", "ndim", "grad", "is_cuda", "T", "mT")
# methods only tensors have (`size`, `clone`, `contiguous` are left out: PyG's `Data` has them)
TENSOR_USE_METHODS = frozenset(
    {
        "dim",
        "view",
        "reshape",
        "unsqueeze",
        "squeeze",
        "permute",
        "transpose",
        "flatten",
        "masked_fill",
        "masked_fill_",
        "expand",
        "repeat",
        "chunk",
        "sum",
        "mean",
        "argmax",
        "softmax",
        "float",
        "long",
        "half",
        "detach",
        "item",
        "type_as",
        "new_zeros",
        "new_ones",
        "new_full",
        "new_empty",
        "new_tensor",
        "matmul",
        "bmm",
        "index_select",
        "gather",
        "clamp",
        "abs",
        "pow",
        "exp",
        "log",
        "sqrt",
        "topk",
        "narrow",
    }
)
# torch functions that build a tensor from Python data: an argument of theirs may be a list
TENSOR_CONSTRUCTORS = frozenset(
    {
        "torch.tensor",
        "torch.as_tensor",
        "torch.asarray",
        "torch.from_numpy",
        "torch.Tensor",
        "torch.FloatTensor",
        "torch.LongTensor",
        "torch.stack",
        "torch.cat",
    }
)


def training_loops(ctx: RuleContext) -> dict[int, Loop]:
    """The innermost loop around each `backward()`, by the id of each: the loops that run once
    per step. Found once per analysis: `step_loop` asks whether a loop is one of them at every
    step of its climbs."""
    key = "layout:training_loops"
    found: dict[int, Loop] | None = ctx.sem.derived.get(key)
    if found is None:
        found = ctx.sem.derived[key] = {}
        for call in training_of(ctx.sem).backward_calls:
            loops = ctx.sem.enclosing_loops(call)
            if loops:
                found.setdefault(id(loops[0]), loops[0])
    return found


def step_loop(ctx: RuleContext, node: ast.AST) -> Loop | None:
    """The training loop `node` runs in on every iteration, if any: the innermost training loop
    among `enclosing_loops(node)`, when `runs_every_iteration` there."""
    training = training_loops(ctx)
    if not training:
        return None
    # one climb answers both: up to the first training loop whose body holds the path (the
    # first of the loops `enclosing_loops` lists that trains), stopping at a branch on the way
    # (what `runs_every_iteration` looks for, an inner loop not counted): below a branch the
    # node runs on some iterations only, whichever loop is above. Most nodes asked about are in
    # no training loop: this spares the memo of loops filled for every node on their way up.
    parents = ctx.sem.parents
    child = node
    parent = parents.get(node)
    while parent is not None:
        kind = type(parent)
        if kind in SCOPE_OR_MODULE_TYPES:
            return None  # where `enclosing_loops` stops
        if id(parent) in training and in_loop_body(parent, child):  # type: ignore[arg-type]  # a training loop
            return parent  # type: ignore[return-value]  # a training loop
        if kind in BRANCH_TYPES:
            return None
        child = parent
        parent = parents.get(parent)
    return None


def reaching_binding(ctx: RuleContext, name: str, at: ast.AST) -> Definition | None:
    """The binding of `name` that `at` sees, unless it may not run before `at`."""
    definition = flow_of(ctx.sem, function_scope(ctx.sem, at)).reaching(name, at)
    statement = ctx.sem.enclosing_statement(at) or at
    if definition is not None and in_exclusive_branches(ctx.sem, definition.node, statement):
        return None  # bound in the other branch of an `if`: what reaches here is unknown
    return definition


def is_tensor_call(ctx: RuleContext, call: ast.Call) -> bool:
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


def is_tensor_expr(
    ctx: RuleContext, expr: ast.AST, at: ast.AST, depth: int = 0, by_use: bool = True
) -> bool:
    """`expr` evaluates to a tensor, as far as this file shows: a torch factory or op, a model's
    output, tensor methods and arithmetic on those, a batch element from a DataLoader loop, a
    parameter annotated `Tensor` or (with `by_use`) used as one."""
    if depth > 4:
        return False
    sem = ctx.sem
    if isinstance(expr, ast.Call):
        if is_tensor_call(ctx, expr):
            return True
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in TENSOR_METHODS:
            return is_tensor_expr(ctx, func.value, at, depth + 1, by_use)
        return sem.kind_of(func) is ValueKind.MODEL and is_module_instance(ctx, func)
    if isinstance(expr, ast.BinOp):
        return is_tensor_expr(ctx, expr.left, at, depth + 1, by_use) or is_tensor_expr(
            ctx, expr.right, at, depth + 1, by_use
        )
    if isinstance(expr, ast.UnaryOp):
        return is_tensor_expr(ctx, expr.operand, at, depth + 1, by_use)
    if isinstance(expr, ast.Compare):
        return any(
            is_tensor_expr(ctx, side, at, depth + 1, by_use)
            for side in (expr.left, *expr.comparators)
        )
    if isinstance(expr, ast.Subscript):
        return is_tensor_expr(ctx, expr.value, at, depth + 1, by_use)
    if isinstance(expr, ast.Attribute):
        if expr.attr in ("T", "mT", "H", "mH", "grad", "real", "imag"):
            return is_tensor_expr(ctx, expr.value, at, depth + 1, by_use)
        return _attribute_holds_tensor(ctx, expr, at)
    if isinstance(expr, ast.Name):
        return _name_holds_tensor(ctx, expr.id, at, depth, by_use)
    return False


def is_module_instance(ctx: RuleContext, func: ast.AST) -> bool:
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
    return bool(values) and all(isinstance(v, ast.Call) and is_tensor_call(ctx, v) for v in values)


def _name_holds_tensor(
    ctx: RuleContext, name: str, at: ast.AST, depth: int, by_use: bool = True
) -> bool:
    sem = ctx.sem
    if sem.kinds.get(name) is not None:
        return False
    definition = reaching_binding(ctx, name, at)
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
    value = element_for(node, name, definition.value)
    if value is None:
        return False
    return is_tensor_expr(ctx, value, node, depth + 1, by_use)


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
    batch = reaching_binding(ctx, node.value.id, node)
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
        if iterable.func.id == "enumerate" and enumerated and isinstance(target, ast.Tuple):
            iterable, target = iterable.args[0], target.elts[-1]
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


def element_for(node: ast.Assign | ast.AnnAssign, name: str, value: ast.AST) -> ast.AST | None:
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
    if ctx.sem.kind_of(iterable) is not ValueKind.LOADER or not _collates_by_default(ctx, iterable):
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
    return by_use and used_as_tensor(ctx, function, name)


def used_as_tensor(
    ctx: RuleContext, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str
) -> bool:
    for node in walk(function):
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
            and is_tensor_call(ctx, parent)
            and ctx.sem.call_qualname(parent) not in TENSOR_CONSTRUCTORS
        ):
            return True
    return False


def int_constant(node: ast.AST) -> int | None:
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


def is_device_like(ctx: RuleContext, node: ast.AST) -> bool:
    """`device`, `"cuda"`, `x.device`, `torch.device(...)`, `args.device`."""
    # exact type tests (the parser makes no subclasses), the usual `x.to(device)` first
    if type(node) is ast.Name:
        return names_device_variable(ctx.sem, node)
    if type(node) is ast.Constant:
        return isinstance(node.value, str) and node.value.split(":")[0] in DEVICE_TYPES
    if type(node) is ast.Call:
        return ctx.sem.call_qualname(node) == "torch.device"
    return names_device_variable(ctx.sem, node)


DEVICE_TYPES = ("cuda", "cpu", "mps", "xpu", "meta")


def names_device_variable(sem: Semantics, node: ast.AST) -> bool:
    """`device`, `args.device`, `x.device`, `self.device_id`: a name or attribute chain whose
    last part says it holds a device."""
    if type(node) is ast.Name:  # no dotted name to build and split: most moves name `device`
        return "device" in node.id.lower()
    dotted = sem.dotted(node)
    return dotted is not None and "device" in dotted.rsplit(".", 1)[-1].lower()
