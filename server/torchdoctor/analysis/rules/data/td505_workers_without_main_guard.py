"""TD505 workers-without-main-guard: DataLoader worker processes started at import time, outside
`if __name__ == "__main__":`."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from functools import cached_property

from ...bindings import (
    assigned_name,
    assignments_to,
    at_module_level,
    class_of_instance,
    enclosing_class,
    methods_of,
    module_functions,
    scope_of,
)
from ...context import RuleContext
from ...expressions import last_name
from ...findings import Edit, Finding, Fix, Severity, Span, called_names, rule
from ...indentation import indent_lines, indent_unit
from ...loader_calls import LOADER_CLASSES, Arguments, loader_calls
from ...semantics import (
    BlockIndex,
    Function,
    Gathered,
    Semantics,
    end_position,
    position,
    starting_within,
)
from ._shared import (
    binding_scope,
    in_main_guard,
    int_constant,
    is_main_guard,
    iteration_sites,
    parameter_names,
    reaches_from_module,
)


@rule(
    "TD505",
    "workers-without-main-guard",
    Severity.WARNING,
    'DataLoader worker processes started at import time, outside `if __name__ == "__main__":`.',
    fixable=True,
    # every finding is at a DataLoader call (`loader_calls`)
    spells=called_names(*LOADER_CLASSES),
)
def workers_without_main_guard(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    if ctx.doc.path.endswith(".ipynb"):
        # a notebook kernel's `__main__` has no file for spawned workers to import again: a
        # guard changes nothing there (workers need the dataset defined in an imported module)
        return
    if not loader_calls(sem) or _forces_fork(sem):
        return  # no DataLoader, no worker
    sites = _WorkerStarts(ctx).unguarded_module_sites()
    # The first place is where the re-imported script breaks; one guard fixes every later one.
    for node in sites[:1]:
        message = (
            "DataLoader worker processes start here, at module level without "
            '`if __name__ == "__main__":`: under the spawn and forkserver start methods '
            "(Windows, macOS) each worker re-imports this file, reaches this line again and "
            'fails ("An attempt has been made to start a new process before the current '
            'process has finished its bootstrapping phase"); put the script part under a '
            "main guard"
        )
        yield ctx.finding("TD505", node, message, _main_guard_fix(ctx, node))


def _forces_fork(sem: Semantics) -> bool:
    for call in sem.method_calls("set_start_method"):
        if call.args and isinstance(call.args[0], ast.Constant) and call.args[0].value == "fork":
            return True
    return False


def _starts_workers(sem: Semantics, args: Arguments) -> bool:
    context = args.get("multiprocessing_context")
    if isinstance(context, ast.Constant) and context.value == "fork":
        return False
    return _positive_count(sem, args.get("num_workers"))


def _positive_count(sem: Semantics, value: ast.AST | None, depth: int = 0) -> bool:
    """A worker count that is certainly above zero: `4`, `NUM_WORKERS = 4`, `os.cpu_count()`."""
    if value is None or depth > 3:
        return False
    number = int_constant(value)
    if number is not None:
        return number > 0
    if isinstance(value, ast.Call):
        name = last_name(sem, value.func)
        if name == "cpu_count":
            return True
        if name in ("min", "max") and value.args:
            results = [_positive_count(sem, arg, depth + 1) for arg in value.args]
            return all(results) if name == "min" else any(results)
        return False
    if isinstance(value, ast.Name):
        assigns = [
            assign
            for assign in assignments_to(sem, value.id)
            if at_module_level(sem, assign) and isinstance(sem.parent(assign), ast.Module)
        ]
        if len(assigns) == 1 and assigns[0].value is not None:
            return _positive_count(sem, assigns[0].value, depth + 1)
    return False


class _WorkerStarts:
    """Where loaders with worker processes are iterated, followed through local calls."""

    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx
        self.sem = ctx.sem
        self.loaders: list[tuple[ast.Call, str]] = []
        for call, args in loader_calls(self.sem):
            handle = assigned_name(self.sem, call)
            if handle is not None and _starts_workers(self.sem, args):
                self.loaders.append((call, handle))
        # the scopes of the handles and the module's functions are made when first asked
        # for: only a module-level call of a local function asks (most files have none)
        self.memo: dict[int, bool] = {}
        self.param_memo: dict[tuple[int, str], bool] = {}
        self.calls_in_functions: Gathered[int, ast.Call] | None = None
        self.direct_starters: set[int] | None = None
        self.method_names: set[str] | None = None

    @cached_property
    def loader_scopes(self) -> dict[str, set[ast.AST | None]]:
        """Per handle, the scopes its worker loaders are bound in (see `same_binding`)."""
        scopes: dict[str, set[ast.AST | None]] = {}
        for call, handle in self.loaders:
            scope = binding_scope(self.sem, handle, call)
            scopes.setdefault(handle, set()).add(scope)
        return scopes

    @cached_property
    def functions(self) -> Mapping[str, Function]:
        return module_functions(self.sem)

    # -- functions ---------------------------------------------------------------------------
    def function_starts(self, function: Function) -> bool:
        key = id(function)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = False  # cycles: assume not
        result = self._function_starts(function)
        self.memo[key] = result
        return result

    def _function_starts(self, function: Function) -> bool:
        if self.direct_starters is None:
            self.direct_starters = set()
            for call, handle in self.loaders:
                for site in iteration_sites(self.sem, handle, call):
                    owner = self.sem.enclosing_function(site.node)
                    if owner is not None:
                        self.direct_starters.add(id(owner))
        if id(function) in self.direct_starters:
            return True
        for call in self._calls_inside(function):
            if self.call_starts(call):
                return True
        return False

    def _calls_inside(self, function: Function) -> list[ast.Call]:
        if self.calls_in_functions is None:
            self.calls_in_functions = self.sem.whole.gathered(
                "data:calls-by-function", calls_by_function
            )
        calls = self.calls_in_functions
        return calls[id(function)] if id(function) in calls else []

    def callee(self, call: ast.Call) -> tuple[Function, bool] | None:
        """The local function a call runs, and whether it is a method (its `self` is bound)."""
        sem = self.sem
        func = call.func
        if isinstance(func, ast.Name):
            target = self.functions.get(func.id)
            return (target, False) if target is not None else None
        if not isinstance(func, ast.Attribute):
            return None
        receiver = func.value
        cls: ast.ClassDef | None = None
        if isinstance(receiver, ast.Name) and receiver.id == "self":
            cls = enclosing_class(sem, call)
        elif isinstance(receiver, ast.Name):
            cls = class_of_instance(sem, receiver.id, call)
        if cls is None:
            return None
        method = methods_of(cls).get(func.attr)
        return (method, True) if method is not None else None

    def _may_call_local(self, call: ast.Call) -> bool:
        """A cheap first look: a call of a local function or of a local class's method."""
        func = call.func
        if isinstance(func, ast.Name):
            return func.id in self.functions
        if self.method_names is None:
            self.method_names = {name for cls in self.sem.classes for name in methods_of(cls)}
        return isinstance(func, ast.Attribute) and func.attr in self.method_names

    def call_starts(self, call: ast.Call) -> bool:
        found = self.callee(call)
        if found is None:
            return False
        function, is_method = found
        if self.function_starts(function):
            return True
        # `train(loader)` with a worker loader, where `train` iterates that parameter
        parameters = parameter_names(function)
        if is_method and parameters:
            parameters = parameters[1:]
        passed: list[tuple[str, ast.AST]] = list(zip(parameters, call.args, strict=False))
        passed += [(k.arg, k.value) for k in call.keywords if k.arg is not None]
        for parameter, value in passed:
            if not self._is_worker_loader(value, call):
                continue
            if self._iterates_parameter(function, parameter):
                return True
        return False

    def _is_worker_loader(self, value: ast.AST, at: ast.AST) -> bool:
        dotted = self.sem.dotted(value)
        if dotted is None or dotted not in self.loader_scopes:
            return False
        bound_scopes = self.loader_scopes[dotted]
        used_scope = binding_scope(self.sem, dotted, at)
        if used_scope in bound_scopes:
            return True
        return any(isinstance(scope, ast.Module) for scope in bound_scopes) and reaches_from_module(
            self.sem, dotted, used_scope
        )

    def _iterates_parameter(self, function: Function, parameter: str) -> bool:
        key = (id(function), parameter)
        if key not in self.param_memo:
            self.param_memo[key] = bool(
                [
                    site
                    for site in iteration_sites(self.sem, parameter, function.body[0])
                    if self.sem.enclosing_function(site.node) is function
                ]
            )
        return self.param_memo[key]

    # -- the module ----------------------------------------------------------------------------
    def unguarded_module_sites(self) -> list[ast.expr]:
        sem = self.sem
        sites: list[ast.expr] = []
        for call, handle in self.loaders:
            if not handle.startswith("self.") and scope_of(sem.whole, call) is not sem.whole.tree:
                continue  # a function's own loader: it is iterated in that function only
            for site in iteration_sites(sem, handle, call):
                if at_module_level(sem, site.node):
                    sites.append(site.node)
        if self.loaders:
            module_calls = sem.whole.gathered("data:module-level-calls", module_level_calls)
            for call in module_calls.get("", ()):
                # the guard is asked first: a guarded call is dropped below whatever it starts
                if (
                    self._may_call_local(call)
                    and not in_main_guard(sem, call)
                    and self.call_starts(call)
                ):
                    sites.append(call)
        if not sites:
            return sites  # most files start no workers at module level: nothing to sort
        unique: dict[int, ast.expr] = {}
        for node in sites:
            if not in_main_guard(sem, node):
                unique.setdefault(id(node), node)
        return sorted(unique.values(), key=lambda n: (n.lineno, n.col_offset))


def calls_by_function(sem: Semantics, block: BlockIndex) -> dict[int, list[ast.Call]]:
    """The block's calls by the function whose body holds them (by id)."""
    found: dict[int, list[ast.Call]] = {}
    for call in block.calls:
        owner = sem.enclosing_function(call)
        if owner is not None:
            found.setdefault(id(owner), []).append(call)
    return found


def module_level_calls(sem: Semantics, block: BlockIndex) -> dict[str, list[ast.Call]]:
    """The block's calls outside any function, class body or lambda, and outside the body of
    a top-level main guard, under one key. Those of a top-level `def` or `class`, its header's
    too (a decorator, a default, a base), are under it: only the other statements' calls are
    looked at, found by position; of a main guard, its `else:`'s."""
    calls = block.calls
    found: list[ast.Call] = []
    for statement in block.statements:
        kind = type(statement)
        if kind in _HOLDING_NO_MODULE_LEVEL_CALL:
            continue
        parts: list[ast.stmt] = [statement]
        if kind is ast.If and is_main_guard(statement.test):  # type: ignore[attr-defined]  # type() tested above
            # a main guard's test is a comparison of a name with a string: it holds no call
            parts = statement.orelse  # type: ignore[attr-defined]  # type() tested above
        for part in parts:
            found.extend(
                call
                for call in starting_within(calls, position(part), end_position(part))
                if at_module_level(sem, call)
            )
    return {"": found} if found else {}


# a definition's calls are under it (its header's too); an import calls nothing
_HOLDING_NO_MODULE_LEVEL_CALL = frozenset(
    {ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom}
)


def _main_guard_fix(ctx: RuleContext, node: ast.AST) -> Fix | None:
    """Put everything from the statement that starts the workers to the end of the file under
    `if __name__ == "__main__":`."""
    sem = ctx.sem
    statement = sem.top_level_statement(node)
    if statement is None or statement.col_offset != 0:
        return None
    doc = ctx.doc
    first = doc.span_of(statement).start_line
    last = doc.index.line_count - 1
    while last > first and not doc.index.line(last).strip():
        last -= 1
    unit = indent_unit(ctx)
    edits = indent_lines(ctx, first, last, unit)
    if not edits or edits[0].span.start_line != first:
        return None
    guard = Edit(Span(first, 0, first, 0), f'if __name__ == "__main__":{doc.line_break()}{unit}')
    return Fix(
        'Run the script part under `if __name__ == "__main__":`',
        (guard, *edits[1:]),
        safe=False,
    )
