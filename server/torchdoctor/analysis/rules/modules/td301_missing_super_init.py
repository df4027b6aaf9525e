"""TD301 missing-super-init: An nn.Module subclass whose __init__ never runs
nn.Module.__init__()."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Edit, Finding, Fix, Severity, Span, rule
from ...function_body import own_nodes
from ...semantics import MODULE_BASES, Function, Semantics, position
from .module_classes import (
    ancestors_in_file,
    is_super_call,
    local_class,
    method_named,
    methods_in,
    module_classes_of,
    self_parameter,
)

# torch.nn classes whose __init__ can be called without arguments
NO_ARGUMENT_BASES = frozenset(
    {
        *MODULE_BASES,
        "torch.nn.Sequential",
        "torch.nn.ModuleList",
        "torch.nn.ModuleDict",
        "torch.nn.ParameterList",
        "torch.nn.ParameterDict",
    }
)


@rule(
    "TD301",
    "missing-super-init",
    Severity.ERROR,
    "An nn.Module subclass whose __init__ never runs nn.Module.__init__().",
    fixable=True,
)
def missing_super_init(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for cls in module_classes_of(sem):
        init = method_named(cls, "__init__")
        if init is None:
            continue
        init_calls = _body_init_calls(sem, init)
        wrong = list(_wrong_super_calls(ctx, cls, init, init_calls)) if init_calls else []
        yield from wrong
        if wrong or _initialises(ctx, cls, init, init_calls) or _only_raises(init):
            continue
        message = (
            f"`{cls.name}.__init__` never calls `super().__init__()`, so nn.Module is never set "
            'up: the first submodule or parameter assigned to `self` raises "AttributeError: '
            'cannot assign module before Module.__init__() call" (and calling the module, '
            "`.to()` or `.parameters()` raise AttributeError)"
        )
        fix = _insert_super_fix(ctx, cls, init)
        yield ctx.finding("TD301", _header_span(ctx, init), message, fix)


def _header_span(ctx: RuleContext, function: Function) -> Span:
    """`def __init__` on the definition's line."""
    line = function.lineno - 1
    start = ctx.doc.index.byte_to_char(line, function.col_offset)
    text = ctx.doc.index.line(line)
    position = text.find(function.name, start)
    end = position + len(function.name) if position >= 0 else len(text)
    return Span(line, start, line, end)


def _initialises(
    ctx: RuleContext, cls: ast.ClassDef, init: Function, init_calls: list[ast.Call]
) -> bool:
    """A `super().__init__()`, `Base.__init__(self)` or a helper method that does either.
    `init_calls` are the `.__init__(...)` calls of its own body (`_body_init_calls`)."""
    self_name = self_parameter(init)
    # the calls that answer at once are among the indexed ones: most classes call
    # `super().__init__()`, found without the walk below (which would find the same)
    for call in init_calls:
        if _calls_init_itself(call, self_name):
            return True
    helpers: set[str] = set()
    for node in own_nodes(init):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        func = node.func
        if func.attr == "__init__":
            if _calls_init_itself(node, self_name):
                return True
        elif isinstance(func.value, ast.Name) and func.value.id == self_name:
            helpers.add(func.attr)
    for method in methods_in(cls):
        if method.name in helpers and method is not init:
            for node in own_nodes(method):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "__init__"
                ):
                    return True
    return False


def _calls_init_itself(call: ast.Call, self_name: str | None) -> bool:
    """A `.__init__(...)` call that sets this object up: `super().__init__()`,
    `nn.Module.__init__(self)`, `Base.__init__(self, ...)`."""
    if is_super_call(call.func.value):  # type: ignore[attr-defined]  # an `.__init__` call: an attribute
        return True
    return bool(call.args) and isinstance(call.args[0], ast.Name) and call.args[0].id == self_name


def _only_raises(function: Function) -> bool:
    """An abstract `__init__` that only raises (or only has a docstring and raises)."""
    body = [s for s in function.body if not _is_docstring(s)]
    return bool(body) and all(isinstance(s, ast.Raise) for s in body)


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _wrong_super_calls(
    ctx: RuleContext, cls: ast.ClassDef, init: Function, init_calls: list[ast.Call]
) -> Iterator[Finding]:
    """`super(nn.Module, self).__init__()` and `super(UnrelatedClass, self).__init__()`, among
    the `.__init__(...)` calls of its own body (`init_calls`)."""
    sem = ctx.sem
    self_name = self_parameter(init)
    for node in init_calls:
        if not isinstance(node.func, ast.Attribute) or not is_super_call(node.func.value):
            continue
        super_call = node.func.value
        assert isinstance(super_call, ast.Call)
        if len(super_call.args) != 2 or super_call.keywords:
            continue
        first, second = super_call.args
        if not (isinstance(second, ast.Name) and second.id == self_name):
            continue
        qualname = sem.qualname(first)
        if qualname in ("torch.nn.Module", "torch.nn.modules.module.Module"):
            message = (
                f"`super({ctx.doc.source_of(first)}, {self_name})` starts the lookup *after* "
                "nn.Module, so `nn.Module.__init__` never runs for this class: the first "
                'submodule or parameter assigned to `self` raises "AttributeError: cannot '
                'assign module before Module.__init__() call"; use `super().__init__()`'
            )
        elif (
            isinstance(first, ast.Name)
            and first.id != cls.name
            and first.id not in sem.imports
            and local_class(sem, first.id) is not None
            and not _is_rebound(sem, first.id)
            and first.id not in ancestors_in_file(sem, cls)
        ):
            message = (
                f"`super({first.id}, {self_name})` names a class `{cls.name}` does not derive "
                f'from: constructing `{cls.name}` raises "TypeError: super(type, obj): obj must '
                'be an instance or subtype of type" and nn.Module is never set up; use '
                "`super().__init__()`"
            )
        else:
            continue
        fix = None
        if node.args or node.keywords or _bases_take_no_arguments(ctx, cls):
            fix = Fix("Use `super().__init__()`", (ctx.replace(super_call, "super()"),))
        yield ctx.finding("TD301", super_call, message, fix)


def _init_calls_by_function(sem: Semantics) -> dict[int, list[ast.Call]]:
    """The file's `.__init__(...)` calls by the function whose own body holds them (by id),
    in source order; grouped once per file."""
    found: dict[int, list[ast.Call]] | None = sem.derived.get("modules:init-calls")
    if found is None:
        found = {}
        for call in sem.method_calls("__init__"):
            function = sem.enclosing_function(call)
            if function is not None:
                found.setdefault(id(function), []).append(call)
        sem.derived["modules:init-calls"] = found
    return found


def _body_init_calls(sem: Semantics, init: Function) -> list[ast.Call]:
    """The `.__init__(...)` calls in the function's body (not its signature) and not in nested
    functions, classes or lambdas, in source order: what a walk of its own nodes would find,
    without the walk."""
    calls = _init_calls_by_function(sem).get(id(init))
    if not calls or not init.body:
        return []
    body_start = position(init.body[0])
    return [call for call in calls if position(call) >= body_start]


def _is_rebound(sem: Semantics, name: str) -> bool:
    for assign in sem.assigns:
        targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def _bases_take_no_arguments(ctx: RuleContext, cls: ast.ClassDef, depth: int = 0) -> bool:
    """True when `super().__init__()` with no arguments works for every base of `cls`."""
    sem = ctx.sem
    if depth > 8 or not cls.bases:
        return False
    for base in cls.bases:
        qualname = sem.qualname(base)
        if qualname is not None:
            if qualname not in NO_ARGUMENT_BASES:
                return False
            continue
        dotted = sem.dotted(base)
        local = local_class(sem, dotted) if dotted is not None else None
        if local is None:
            return False
        init = method_named(local, "__init__")
        if init is None:
            if not _bases_take_no_arguments(ctx, local, depth + 1):
                return False
        elif _required_arguments(init):
            return False
    return True


def _required_arguments(function: Function) -> bool:
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args][1:]
    without_default = len(positional) - len(arguments.defaults)
    if without_default > 0:
        return True
    return any(default is None for default in arguments.kw_defaults)


def _insert_super_fix(ctx: RuleContext, cls: ast.ClassDef, init: Function) -> Fix | None:
    if not _bases_take_no_arguments(ctx, cls):
        return None
    body = init.body
    header_line = init.lineno - 1
    first = body[0]
    if ctx.doc.span_of(first).start_line == header_line:
        return None  # `def __init__(self): ...` on one line
    title = "Insert `super().__init__()` at the start of `__init__`"
    if _is_docstring(first):
        if len(body) > 1:
            return Fix(title, (ctx.insert_line_before(body[1], "super().__init__()"),))
        span = ctx.doc.span_of(first)
        indent = ctx.doc.indentation_of(span.start_line)
        if not ctx.statement_owns_lines(first):
            return None
        point = Span(span.end_line + 1, 0, span.end_line + 1, 0)
        if span.end_line + 1 >= len(ctx.doc.index.lines):
            return None
        return Fix(title, (Edit(point, f"{indent}super().__init__(){ctx.doc.line_break()}"),))
    return Fix(title, (ctx.insert_line_before(first, "super().__init__()"),))
