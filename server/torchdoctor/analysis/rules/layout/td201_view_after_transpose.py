"""TD201 view-after-transpose: `.view()` that merges dimensions of a transposed/permuted/expanded
tensor."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Edit, Finding, Fix, Severity, Span, rule
from ._shared import element_for, int_constant, reaching_binding

SWAPPING_METHODS = ("transpose", "swapaxes", "swapdims")
MOVING_METHODS = ("movedim", "moveaxis")
TRANSPOSED_ATTRIBUTES = ("T", "mT", "H", "mH")
SHAPE_KEEPING_METHODS = (
    "contiguous",
    "float",
    "half",
    "double",
    "to",
    "cuda",
    "cpu",
    "detach",
    "clone",
    "requires_grad_",
)


@rule(
    "TD201",
    "view-after-transpose",
    Severity.ERROR,
    "`.view()` that merges dimensions of a transposed/permuted/expanded tensor.",
    fixable=True,
    # every finding is at a `.view(...)` call (Semantics.method_calls)
    spells=("view",),
)
def view_after_transpose(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.sem.method_calls("view"):
        func = call.func
        assert isinstance(func, ast.Attribute)  # Semantics.method_calls: attribute calls
        receiver = func.value
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
            'stride"; insert `.contiguous()` before `.view()` (or use `.reshape()`)'
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
    if int_constant(node) is not None:
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


def _layout_source(ctx: RuleContext, receiver: ast.AST, at: ast.AST) -> tuple[str, int] | None:
    """(the op, how many dimension seams it leaves that a view cannot merge across) when the
    receiver is a transposed/permuted/expanded/narrowed tensor (directly or via a name)."""
    if isinstance(receiver, ast.Name):
        definition = reaching_binding(ctx, receiver.id, at)
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
        first, second = (int_constant(a) for a in args)
        if first is None or second is None:
            return None
        permutation = _swap_permutation(first, second, known_rank)
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
        source, destination = (int_constant(a) for a in args)
        if source is None or destination is None:
            return None
        permutation = _move_permutation(source, destination, known_rank)
        op = f".{method}({source}, {destination})"
    elif method == "expand":
        return _expand_seams(ctx, subject, args, at)
    elif method == "narrow" and len(args) == 3:
        dim = int_constant(args[0])
        if dim is None or dim < 1:
            return None
        return f".narrow({dim}, ...)", 1
    else:
        return None
    if permutation is None:
        return None
    return op, _seams(permutation)


LAYOUT_CHANGING_METHODS = frozenset(
    {
        *SWAPPING_METHODS,
        *MOVING_METHODS,
        "permute",
        "t",
        "expand",
        "expand_as",
        "narrow",
        "as_strided",
    }
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
        definition = reaching_binding(ctx, expr.id, at)
        if definition is None or not isinstance(definition.node, ast.Assign):
            return False
        if definition.value is None:
            return False
        value = element_for(definition.node, expr.id, definition.value)
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
    dims: list[int] = []
    for arg in args:
        dim = int_constant(arg)
        if dim is None:
            return None
        dims.append(dim)
    return dims or None


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
    dim = int_constant(subject.args[0])
    if dim is None or any(isinstance(a, ast.Starred) for a in args) or len(args) < 2:
        return None
    rank = len(args)
    dim = dim + rank if dim < 0 else dim
    if not 0 <= dim < rank or int_constant(args[dim]) in (1, -1):
        return None
    return ".expand(...)", int(dim > 0) + int(dim < rank - 1)


def _rank_of(ctx: RuleContext, expr: ast.AST, at: ast.AST, depth: int) -> int | None:
    """The number of dimensions of `expr` when the file states it (`x.view(B, T, H, D)`,
    `torch.randn(2, 3, 4)`), else None."""
    if depth > 8:
        return None
    if isinstance(expr, ast.Name):
        definition = reaching_binding(ctx, expr.id, at)
        if definition is None or not isinstance(definition.node, ast.Assign):
            return None
        if definition.value is None:
            return None
        value = element_for(definition.node, expr.id, definition.value)
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
        if expr.args and all(
            _is_size_expression(ctx, a) or isinstance(a, ast.Name) for a in expr.args
        ):
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
        return 1 if int_constant(only) is not None else None
    return len(call.args)


RANK_KEEPING_METHODS = frozenset(
    {
        *SHAPE_KEEPING_METHODS,
        "masked_fill",
        "softmax",
        "log_softmax",
        "type_as",
        "exp",
        "sigmoid",
        "tanh",
        "relu",
        "abs",
        "neg",
        "pow",
        "mul",
        "add",
        "div",
        "sub",
    }
)
RANK_KEEPING_FUNCTIONS = frozenset(
    {
        *(
            f"torch.nn.functional.{name}"
            for name in (
                "softmax",
                "log_softmax",
                "dropout",
                "scaled_dot_product_attention",
                "relu",
                "gelu",
                "silu",
                "layer_norm",
                "normalize",
            )
        ),
        "torch.softmax",
        "torch.tanh",
        "torch.sigmoid",
        "torch.relu",
        "torch.exp",
        "torch.abs",
        "torch.masked_fill",
    }
)
