"""Module rules: nn.Module subclasses that are not set up, submodules and tensors the module
does not know about, forward() called around the hooks, and losses fed the wrong activation."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..context import RuleContext
from ..dataflow import flow_of
from ..findings import Edit, Finding, Fix, Severity, Span, rule
from ..semantics import FUNCTION_NODES, MODULE_BASES, Function, Semantics, ValueKind
from ..training import function_scope, statement_list_of

# ---- shared facts about the classes of this file -------------------------------------------

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
# torch.nn classes that are not modules
NON_MODULE_NN_CLASSES = frozenset(
    {"Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer"}
)
# torch.nn modules without parameters, buffers or a train/eval difference: a plain list of them
# loses nothing
STATELESS_NN_CLASSES = frozenset(
    {
        "ReLU", "ReLU6", "GELU", "SiLU", "Mish", "ELU", "SELU", "CELU", "LeakyReLU", "Sigmoid",
        "Tanh", "Softmax", "LogSoftmax", "Softmin", "Softplus", "Softsign", "Hardtanh",
        "Hardswish", "Hardsigmoid", "Tanhshrink", "Softshrink", "Hardshrink", "LogSigmoid",
        "Threshold", "GLU", "Identity", "Flatten", "Unflatten", "Upsample", "PixelShuffle",
        "PixelUnshuffle", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d",
        "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
        "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "ZeroPad2d",
        "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d",
        "ReplicationPad1d", "ReplicationPad2d", "ChannelShuffle", "CosineSimilarity",
        "PairwiseDistance",
    }
)


def _self_name(function: Function) -> str | None:
    arguments = [*function.args.posonlyargs, *function.args.args]
    return arguments[0].arg if arguments else None


def _methods(cls: ast.ClassDef) -> list[Function]:
    return [s for s in cls.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)]


def _method(cls: ast.ClassDef, name: str) -> Function | None:
    for method in _methods(cls):
        if method.name == name:
            return method
    return None


def own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """Every node of a function body, without the bodies of nested functions and classes."""
    stack = list(reversed(getattr(function, "body", [])))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, FUNCTION_NODES):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _is_module_base(sem: Semantics, base: ast.expr) -> bool:
    qualname = sem.qualname(base)
    if qualname is not None:
        if qualname in MODULE_BASES:
            return True
        head, _, last = qualname.rpartition(".")
        if head in ("torch.nn", "torch.nn.modules") and last[:1].isupper():
            return last not in NON_MODULE_NN_CLASSES
        return False
    dotted = sem.dotted(base)
    return dotted is not None and dotted in sem.module_classes


def _module_classes(sem: Semantics) -> list[ast.ClassDef]:
    """nn.Module subclasses of this file (every class of that name, in source order)."""
    return [
        cls
        for cls in sem.classes
        if cls.name in sem.module_classes and any(_is_module_base(sem, b) for b in cls.bases)
    ]


def nn_class_name(sem: Semantics, func: ast.AST) -> str | None:
    """`Linear` for `nn.Linear`, `torch.nn.Linear`, `from torch.nn import Linear`."""
    qualname = sem.qualname(func)
    if qualname is None:
        return None
    head, _, last = qualname.rpartition(".")
    if (head == "torch.nn" or head.startswith("torch.nn.modules")) and last[:1].isupper():
        return last
    return None


@dataclass
class FileFacts:
    """The classes of this file by name (a name defined twice is ambiguous)."""

    local_classes: dict[str, list[ast.ClassDef]] = field(default_factory=dict)


MOVES = ("to", "cuda", "cpu", "float", "double", "half", "train", "eval")


def _without_moves(value: ast.AST) -> ast.AST:
    """`Net(...).to(device).eval()` → `Net(...)`: modules come back from these calls."""
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in MOVES
        and isinstance(value.func.value, ast.Call)
    ):
        value = value.func.value
    return value


def _constructor_name(sem: Semantics, value: ast.AST) -> str | None:
    """The class a value is built from: `nn.Linear(...)`, `Net(...).to(device)` → its name."""
    value = _without_moves(value)
    if not isinstance(value, ast.Call):
        return None
    qualname = sem.qualname(value.func)
    if qualname is not None:
        return qualname
    dotted = sem.dotted(value.func)
    if dotted is not None and dotted in sem.module_classes:
        return dotted
    return None


def facts_of(sem: Semantics) -> FileFacts:
    facts = sem.derived.get("modules:facts")
    if facts is not None:
        return facts
    facts = FileFacts()
    for cls in sem.classes:
        facts.local_classes.setdefault(cls.name, []).append(cls)
    sem.derived["modules:facts"] = facts
    return facts


def assigned_call(sem: Semantics, node: ast.AST) -> ast.Call | None:
    """The call a name or `self.attr` holds at `node`: the assignment that reaches it in its
    function (else the one module-level assignment); for `self.attr`, the one assignment in
    the class; for other attributes, the one in the file."""
    dotted = sem.dotted(node)
    if dotted is None:
        return None
    value: ast.AST | None = None
    if isinstance(node, ast.Name):
        value = _reaching_value(sem, node)
    else:
        method = sem.enclosing_function(node)
        cls = sem.parent(method) if method is not None else None
        found: list[ast.AST] = []
        for assign in _assignments_by_target(sem).get(dotted, []):
            assert assign.value is not None
            if dotted.startswith("self."):
                owner = sem.enclosing_function(assign)
                if owner is None or sem.parent(owner) is not cls:
                    continue
            found.append(assign.value)
        value = found[0] if len(found) == 1 else None
    if value is None:
        return None
    value = _without_moves(value)
    return value if isinstance(value, ast.Call) else None


def _reaching_value(sem: Semantics, name: ast.Name) -> ast.AST | None:
    scope = function_scope(sem, name)
    flow = flow_of(sem, scope)
    definition = flow.reaching(name.id, name)
    if definition is None:
        definitions = flow.definitions.get(name.id, [])
        if definitions:
            return None  # bound later in this scope only (a loop) or more than once: unclear
        if scope is sem.tree:
            return None
        definitions = flow_of(sem, sem.tree).definitions.get(name.id, [])
        if len(definitions) != 1:
            return None
        definition = definitions[0]
    node = definition.node
    if isinstance(node, ast.Assign) and not (
        len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
    ):
        return None
    if not isinstance(node, ast.Assign | ast.AnnAssign):
        return None
    return definition.value


def _is_parameter(function: Function, name: str) -> bool:
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    every += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
    return any(argument.arg == name for argument in every)


def built_from(sem: Semantics, node: ast.AST) -> str | None:
    """The class a name or `self.attr` is built from, when this file shows it."""
    dotted = sem.dotted(node)
    if isinstance(node, ast.Name) and dotted is not None:
        function = sem.enclosing_function(node)
        assigns = _assignments_by_target(sem).get(dotted, [])
        if function is not None and _is_parameter(function, dotted):
            if not any(sem.enclosing_function(a) is function for a in assigns):
                return None  # whatever the caller passes
        else:
            # every assignment in the file agrees: no need to follow the data flow
            built = _constructors_assigned(sem, dotted, assigns)
            if len(built) == 1 and None not in built:
                return next(iter(built))
    call = assigned_call(sem, node)
    return _constructor_name(sem, call) if call is not None else None


def _constructors_assigned(
    sem: Semantics, dotted: str, assigns: list[ast.Assign | ast.AnnAssign]
) -> set[str | None]:
    """The classes the file's assignments to `dotted` build, memoised per name."""
    cache = sem.derived.setdefault("modules:constructors_assigned", {})
    built = cache.get(dotted)
    if built is None:
        built = cache[dotted] = {
            _constructor_name(sem, a.value) for a in assigns if a.value is not None
        }
    return built


def local_class(sem: Semantics, name: str) -> ast.ClassDef | None:
    classes = facts_of(sem).local_classes.get(name, [])
    return classes[0] if len(classes) == 1 else None


# ---- TD301 ---------------------------------------------------------------------------------
@rule(
    "TD301",
    "missing-super-init",
    Severity.ERROR,
    "An nn.Module subclass whose __init__ never runs nn.Module.__init__().",
    fixable=True,
)
def missing_super_init(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for cls in _module_classes(sem):
        init = _method(cls, "__init__")
        if init is None:
            continue
        wrong = list(_wrong_super_calls(ctx, cls, init))
        yield from wrong
        if wrong or _initialises(ctx, cls, init) or _only_raises(init):
            continue
        message = (
            f"`{cls.name}.__init__` never calls `super().__init__()`, so nn.Module is never set "
            "up: the first submodule or parameter assigned to `self` raises \"AttributeError: "
            "cannot assign module before Module.__init__() call\" (and calling the module, "
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


def _initialises(ctx: RuleContext, cls: ast.ClassDef, init: Function) -> bool:
    """A `super().__init__()`, `Base.__init__(self)` or a helper method that does either."""
    self_name = _self_name(init)
    helpers: set[str] = set()
    for node in own_nodes(init):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        func = node.func
        if func.attr == "__init__":
            if _is_super_call(func.value):
                return True
            if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == self_name:
                return True  # `nn.Module.__init__(self)`, `Base.__init__(self, ...)`
        elif isinstance(func.value, ast.Name) and func.value.id == self_name:
            helpers.add(func.attr)
    for method in _methods(cls):
        if method.name in helpers and method is not init:
            for node in own_nodes(method):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "__init__"
                ):
                    return True
    return False


def _is_super_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


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


def _ancestors_in_file(sem: Semantics, cls: ast.ClassDef) -> set[str]:
    seen: set[str] = set()
    pending = [cls]
    while pending:
        current = pending.pop()
        for base in current.bases:
            dotted = sem.dotted(base)
            if dotted is None or dotted in seen:
                continue
            seen.add(dotted)
            local = local_class(sem, dotted)
            if local is not None:
                pending.append(local)
    return seen


def _wrong_super_calls(ctx: RuleContext, cls: ast.ClassDef, init: Function) -> Iterator[Finding]:
    """`super(nn.Module, self).__init__()` and `super(UnrelatedClass, self).__init__()`."""
    sem = ctx.sem
    self_name = _self_name(init)
    for node in own_nodes(init):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "__init__"
            and _is_super_call(node.func.value)
        ):
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
                "submodule or parameter assigned to `self` raises \"AttributeError: cannot "
                "assign module before Module.__init__() call\"; use `super().__init__()`"
            )
        elif (
            isinstance(first, ast.Name)
            and first.id != cls.name
            and first.id not in sem.imports
            and local_class(sem, first.id) is not None
            and not _is_rebound(sem, first.id)
            and first.id not in _ancestors_in_file(sem, cls)
        ):
            message = (
                f"`super({first.id}, {self_name})` names a class `{cls.name}` does not derive "
                f"from: constructing `{cls.name}` raises \"TypeError: super(type, obj): obj must "
                "be an instance or subtype of type\" and nn.Module is never set up; use "
                "`super().__init__()`"
            )
        else:
            continue
        fix = None
        if node.args or node.keywords or _bases_take_no_arguments(ctx, cls):
            fix = Fix("Use `super().__init__()`", (ctx.replace(super_call, "super()"),))
        yield ctx.finding("TD301", super_call, message, fix)


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
        init = _method(local, "__init__")
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
    return any(
        default is None for default in arguments.kw_defaults
    )


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


# ---- TD302 ---------------------------------------------------------------------------------
LIST_METHODS_MODULELIST_LACKS = frozenset(
    {"index", "count", "remove", "sort", "reverse", "clear", "copy"}
)
DICT_METHODS_MODULEDICT_LACKS = frozenset({"get", "setdefault", "copy", "popitem", "fromkeys"})


@rule(
    "TD302",
    "unregistered-submodules",
    Severity.WARNING,
    "Submodules kept in a plain list or dict: not in parameters(), not moved by .to(), not saved.",
    fixable=True,
)
def unregistered_submodules(ctx: RuleContext) -> Iterator[Finding]:
    for assign, target, method, cls in _self_assignments(ctx):
        value = assign.value
        assert value is not None
        if not isinstance(
            value, ast.List | ast.Tuple | ast.ListComp | ast.Dict | ast.DictComp | ast.Name
        ) and not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
            continue
        container = _module_container(ctx, cls, method, target.attr, value)
        if container is not None:
            yield _unregistered_finding(ctx, cls, target, value, container)


def _self_assignments(
    ctx: RuleContext,
) -> list[tuple[ast.Assign | ast.AnnAssign, ast.Attribute, Function, ast.ClassDef]]:
    """`self.<attr> = value` in the methods of nn.Module subclasses, in source order."""
    sem = ctx.sem
    cached = sem.derived.get("modules:self-assignments")
    if cached is not None:
        return cached
    classes = {id(cls) for cls in _module_classes(sem)}
    found = []
    for assign in sem.assigns:
        if not isinstance(assign, ast.Assign | ast.AnnAssign) or assign.value is None:
            continue
        targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
        if len(targets) != 1:
            continue
        target = targets[0]
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)):
            continue
        method = sem.enclosing_function(assign)
        if method is None or target.value.id != _self_name(method):
            continue
        cls = sem.parent(method)
        if isinstance(cls, ast.ClassDef) and id(cls) in classes:
            found.append((assign, target, method, cls))
    sem.derived["modules:self-assignments"] = found
    return found


def _is_module_constructor(ctx: RuleContext, node: ast.AST, *, stateful: bool) -> bool:
    """A call that builds a fresh module (`nn.Linear(...)`, `Block(...)`, `resnet18()`).

    With `stateful`, only modules with parameters, buffers or a train/eval difference count.
    """
    sem = ctx.sem
    if isinstance(node, ast.IfExp):
        return _is_module_constructor(ctx, node.body, stateful=stateful) and (
            _is_module_constructor(ctx, node.orelse, stateful=False)
        )
    if not isinstance(node, ast.Call):
        return False
    name = nn_class_name(sem, node.func)
    if name is not None:
        if name in NON_MODULE_NN_CLASSES:
            return False
        if stateful and (name in STATELESS_NN_CLASSES or name.endswith("Loss")):
            return False
        return True
    qualname = sem.qualname(node.func)
    if qualname is not None:
        return qualname.startswith("torchvision.models.")
    dotted = sem.dotted(node.func)
    return dotted is not None and dotted in sem.module_classes


def _holds_modules(ctx: RuleContext, elements: list[ast.expr]) -> bool:
    if not elements or any(isinstance(e, ast.Starred) for e in elements):
        return False
    if not all(_is_module_constructor(ctx, e, stateful=False) for e in elements):
        return False
    return any(_is_module_constructor(ctx, e, stateful=True) for e in elements)


@dataclass(frozen=True)
class Container:
    kind: str  # "list" | "dict"
    fixable: bool


def _module_container(
    ctx: RuleContext, cls: ast.ClassDef, method: Function, attr: str, value: ast.expr
) -> Container | None:
    kind: str | None = None
    keys_ok = True
    if isinstance(value, ast.List | ast.Tuple) and _holds_modules(ctx, value.elts):
        kind = "list"
    elif isinstance(value, ast.ListComp) and _holds_modules(ctx, [value.elt]):
        kind = "list"
    elif isinstance(value, ast.Dict) and _holds_modules(ctx, list(value.values)):
        if any(key is None for key in value.keys):
            return None
        kind = "dict"
        keys_ok = all(_is_module_dict_key(key) for key in value.keys)
    elif isinstance(value, ast.DictComp) and _holds_modules(ctx, [value.value]):
        kind = "dict"
        keys_ok = _is_module_dict_key(value.key)
    elif _is_empty(value, ast.List, "list"):
        if _filled_with_modules(ctx, cls, attr, "list"):
            kind = "list"
    elif _is_empty(value, ast.Dict, "dict"):
        if _filled_with_modules(ctx, cls, attr, "dict"):
            kind = "dict"
            keys_ok = False
    elif isinstance(value, ast.Name):
        kind = _local_list_of_modules(ctx, method, value)
    if kind is None or _registered_later(ctx, cls, attr):
        return None
    if _read_only_while_building(ctx, cls, attr):
        return None
    lacking = LIST_METHODS_MODULELIST_LACKS if kind == "list" else DICT_METHODS_MODULEDICT_LACKS
    fixable = keys_ok and not _uses_methods(ctx, cls, attr, lacking)
    return Container(kind, fixable)


CONTAINER_CLASSES = frozenset({"Sequential", "ModuleList", "ModuleDict"})


def _registered_later(ctx: RuleContext, cls: ast.ClassDef, attr: str) -> bool:
    """`nn.ModuleList(self.layers)` or `nn.Sequential(*self.layers)` somewhere in the class."""
    sem = ctx.sem
    for node, _ in _self_attribute_uses(cls, attr):
        parent = sem.parent(node)
        if isinstance(parent, ast.Starred):
            parent = sem.parent(parent)
        if isinstance(parent, ast.Call) and nn_class_name(sem, parent.func) in CONTAINER_CLASSES:
            return True
    return False


def _read_only_while_building(ctx: RuleContext, cls: ast.ClassDef, attr: str) -> bool:
    """A choice table read only while the module is built (`self.backbones = {"r18":
    resnet18(), ...}`, then `self.backbone = self.backbones[name]` in `__init__` or a helper
    only `__init__` calls): the chosen module is registered through the attribute it is stored
    in, and the others are never run. Registering the table would add their parameters."""
    building = _building_methods(cls)
    uses = list(_self_attribute_uses(cls, attr))
    if any(method.name not in building for _, method in uses):
        return False
    return not _named_elsewhere(ctx, cls, attr, uses)


def _building_methods(cls: ast.ClassDef) -> set[str]:
    """`__init__` and the methods of `cls` that are called only from building methods."""
    callers: dict[str, set[str]] = {}
    for method in _methods(cls):
        self_name = _self_name(method)
        for node in own_nodes(method):
            func = node.func if isinstance(node, ast.Call) else None
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == self_name
            ):
                callers.setdefault(func.attr, set()).add(method.name)
    building = {"__init__"}
    changed = True
    while changed:
        changed = False
        for method in _methods(cls):
            name = method.name
            if name in building or name.startswith("__") or name == "forward":
                continue
            called_from = callers.get(name)
            if called_from and called_from <= building:
                building.add(name)
                changed = True
    return building


def _is_empty(value: ast.expr, literal: type, builtin: str) -> bool:
    if isinstance(value, literal):
        return not (value.elts if isinstance(value, ast.List) else value.keys)  # type: ignore[attr-defined]
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == builtin
        and not value.args
        and not value.keywords
    )


def _is_module_dict_key(key: ast.expr | None) -> bool:
    if isinstance(key, ast.Constant):
        return isinstance(key.value, str) and "." not in key.value and key.value != ""
    if isinstance(key, ast.JoinedStr):
        return True
    return (
        isinstance(key, ast.Call) and isinstance(key.func, ast.Name) and key.func.id == "str"
    )


def _self_attribute_uses(cls: ast.ClassDef, attr: str) -> Iterator[tuple[ast.Attribute, Function]]:
    """`self.<attr>` expressions in the methods of `cls`."""
    for method in _methods(cls):
        self_name = _self_name(method)
        for node in own_nodes(method):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == attr
                and isinstance(node.value, ast.Name)
                and node.value.id == self_name
            ):
                yield node, method


def _filled_with_modules(ctx: RuleContext, cls: ast.ClassDef, attr: str, kind: str) -> bool:
    """`self.blocks = []` followed by `self.blocks.append(Block())` (or `self.d[k] = ...`)."""
    sem = ctx.sem
    found = False
    for node, _ in _self_attribute_uses(cls, attr):
        parent = sem.parent(node)
        if kind == "list" and isinstance(parent, ast.Attribute) and parent.attr in (
            "append",
            "insert",
        ):
            call = sem.parent(parent)
            if isinstance(call, ast.Call) and call.func is parent and call.args:
                added = call.args[-1]
                if not _is_module_constructor(ctx, added, stateful=False):
                    return False
                found = found or _is_module_constructor(ctx, added, stateful=True)
        elif kind == "dict" and isinstance(parent, ast.Subscript) and parent.value is node:
            assign = sem.parent(parent)
            if isinstance(assign, ast.Assign) and parent in assign.targets:
                if not _is_module_constructor(ctx, assign.value, stateful=False):
                    return False
                found = found or _is_module_constructor(ctx, assign.value, stateful=True)
    return found


def _local_list_of_modules(ctx: RuleContext, method: Function, value: ast.Name) -> str | None:
    """`layers = []`, `layers.append(nn.Linear(...))` in a loop, then `self.layers = layers`."""
    sem = ctx.sem
    flow = flow_of(sem, method)
    definition = flow.reaching(value.id, value)
    if definition is None or definition.value is None:
        return None
    if len(flow.definitions.get(value.id, [])) != 1:
        return None
    if not isinstance(definition.node, ast.Assign) or not _is_empty(
        definition.value, ast.List, "list"
    ):
        return None
    found = False
    for node in own_nodes(method):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == value.id
        ):
            continue
        if node.func.attr in ("append", "insert") and node.args:
            added = node.args[-1]
            if not _is_module_constructor(ctx, added, stateful=False):
                return None
            found = found or _is_module_constructor(ctx, added, stateful=True)
        elif node.func.attr in ("extend",):
            return None
    for node in own_nodes(method):
        if isinstance(node, ast.Name) and node.id == value.id and node is not value:
            parent = sem.parent(node)
            if isinstance(parent, ast.Attribute) and parent.attr in ("append", "insert"):
                continue
            if isinstance(parent, ast.Assign) and node in parent.targets:
                continue
            return None  # used some other way (`nn.Sequential(*layers)` elsewhere, ...)
    return "list" if found else None


def _uses_methods(ctx: RuleContext, cls: ast.ClassDef, attr: str, methods: frozenset[str]) -> bool:
    for node, _ in _self_attribute_uses(cls, attr):
        parent = ctx.sem.parent(node)
        if isinstance(parent, ast.Attribute) and parent.attr in methods:
            return True
        if isinstance(parent, ast.BinOp):
            return True  # `self.layers + [...]`: list arithmetic
    return False


def _unregistered_finding(
    ctx: RuleContext,
    cls: ast.ClassDef,
    target: ast.Attribute,
    value: ast.expr,
    container: Container,
) -> Finding:
    wrapper = "ModuleList" if container.kind == "list" else "ModuleDict"
    plain = "list" if container.kind == "list" else "dict"
    message = (
        f"`self.{target.attr}` is a plain {plain} of modules: nn.Module does not look inside it, "
        "so their parameters are missing from `parameters()` (the optimizer never trains them), "
        f"`.to()`/`.cuda()` do not move them, `.eval()` does not reach them and `state_dict()` "
        f"does not save them; use `nn.{wrapper}`"
    )
    fix = None
    spelled = ctx.sem.spelling(f"torch.nn.{wrapper}")
    if container.fixable and spelled is not None:
        source = ctx.doc.source_of(value)
        if _is_empty(value, ast.List, "list") or _is_empty(value, ast.Dict, "dict"):
            replacement = f"{spelled}()"
        elif isinstance(value, ast.Tuple) and not source.startswith("("):
            replacement = f"{spelled}(({source}))"
        else:
            replacement = f"{spelled}({source})"
        fix = Fix(f"Wrap in `{spelled}`", (ctx.replace(value, replacement),), safe=False)
    del cls
    return ctx.finding("TD302", target, message, fix)


# ---- TD303 ---------------------------------------------------------------------------------
@rule(
    "TD303",
    "direct-forward-call",
    Severity.WARNING,
    "model.forward(x) instead of model(x): forward and backward hooks do not run.",
    fixable=True,
)
def direct_forward_call(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for call in sem.method_calls("forward"):
        func = call.func
        assert isinstance(func, ast.Attribute)
        receiver = func.value
        if _is_own_forward(ctx, call, receiver):
            continue
        if not _is_module_value(ctx, receiver) or _is_estimator(ctx, receiver):
            continue
        source = ctx.doc.source_of(receiver)
        message = (
            f"`{source}.forward(...)` skips `nn.Module.__call__`: the forward pre-hooks, "
            "forward hooks and backward hooks registered on the module (yours and those "
            f"libraries install) do not run; call `{source}(...)`"
        )
        fix = None
        if _simple_receiver(receiver):
            receiver_end = ctx.doc.span_of(receiver)
            func_end = ctx.doc.span_of(func)
            dot_forward = Span(
                receiver_end.end_line, receiver_end.end_col, func_end.end_line, func_end.end_col
            )
            fix = Fix(f"Call `{source}(...)`", (Edit(dot_forward, ""),))
        yield ctx.finding("TD303", call, message, fix)


# scikit-learn style methods that nn.Module lacks: the receiver is a wrapper (skorch's
# `NeuralNet`, ...) whose own `forward(X)` batches the data and calls the module properly
ESTIMATOR_METHODS = ("fit", "partial_fit", "predict", "predict_proba")


def _is_estimator(ctx: RuleContext, receiver: ast.AST) -> bool:
    sem = ctx.sem
    dotted = sem.dotted(receiver)
    if dotted is None:
        return False
    for method in ESTIMATOR_METHODS:
        for call in sem.method_calls(method):
            func = call.func
            assert isinstance(func, ast.Attribute)
            if sem.dotted(func.value) == dotted:
                return True
    return False


def _simple_receiver(node: ast.AST) -> bool:
    return isinstance(node, ast.Name | ast.Attribute | ast.Call | ast.Subscript)


def _is_own_forward(ctx: RuleContext, call: ast.Call, receiver: ast.AST) -> bool:
    """`self.forward(x)`, `super().forward(x)`, `Base.forward(self, x)`."""
    sem = ctx.sem
    if _is_super_call(receiver):
        return True
    method = sem.enclosing_function(call)
    if method is not None and isinstance(receiver, ast.Name):
        if receiver.id == _self_name(method) and isinstance(sem.parent(method), ast.ClassDef):
            return True
    dotted = sem.dotted(receiver)
    if dotted is None:
        return False
    last = dotted.rsplit(".", 1)[-1]
    # a class, not an instance: an unbound call that passes `self` on purpose
    if dotted in facts_of(sem).local_classes:
        return True
    return last[:1].isupper() and (sem.qualname(receiver) is not None or "." not in dotted)


def _is_module_value(ctx: RuleContext, receiver: ast.AST) -> bool:
    sem = ctx.sem
    if isinstance(receiver, ast.Call):
        return _is_module_constructor(ctx, receiver, stateful=False)
    dotted = sem.dotted(receiver)
    if dotted is None or sem.qualname(receiver) is not None:
        return False
    if _is_graph_module(ctx, receiver):
        return False
    if "." in dotted and not dotted.startswith("self."):
        return sem.kinds.get(dotted) is ValueKind.MODEL
    known = sem.kinds.get(dotted)
    if known is not None:
        return known is ValueKind.MODEL  # built from a module class or constructor here
    # only the name says "model" (an OpenCV `cv2.dnn` net and a camera `isp_model` have a
    # `forward` too): the file must also use it as a module, or call it by the conventional
    # name in a file that imports no other library whose networks have a `forward()`
    if sem.kind_of(receiver) is not ValueKind.MODEL:
        return False
    if dotted in _used_as_module(sem):
        return True
    return dotted in CONVENTIONAL_MODEL_NAMES and not _imports_foreign_networks(sem)


CONVENTIONAL_MODEL_NAMES = frozenset({"model", "net", "self.model", "self.net"})
# inference libraries whose network objects have a `forward()` method of their own
FOREIGN_NETWORK_PACKAGES = frozenset(
    {"cv2", "onnxruntime", "openvino", "tensorrt", "tensorflow", "keras", "paddle", "mxnet"}
)


def _imports_foreign_networks(sem: Semantics) -> bool:
    roots = {qualname.split(".", 1)[0] for qualname in sem.imports.values()}
    return not roots.isdisjoint(FOREIGN_NETWORK_PACKAGES)


# methods an nn.Module has and the other objects with a `forward()` method do not
MODULE_ONLY_METHODS = (
    "parameters", "named_parameters", "buffers", "named_buffers", "state_dict",
    "load_state_dict", "train", "eval", "zero_grad", "modules", "named_modules", "children",
    "named_children", "register_forward_hook", "register_forward_pre_hook",
    "register_full_backward_hook", "requires_grad_",
)


def _used_as_module(sem: Semantics) -> frozenset[str]:
    """Names and `self.` attributes this file calls nn.Module-only methods on."""
    found = sem.derived.get("modules:used-as-module")
    if found is None:
        names: set[str] = set()
        for method in MODULE_ONLY_METHODS:
            for call in sem.method_calls(method):
                dotted = sem.dotted(call.func.value)  # type: ignore[attr-defined]
                if dotted is not None:
                    names.add(dotted)
        found = sem.derived["modules:used-as-module"] = frozenset(names)
    return found


def _is_graph_module(ctx: RuleContext, receiver: ast.AST) -> bool:
    """torch.fx GraphModules: their generated forward is called directly on purpose."""
    sem = ctx.sem
    built = built_from(sem, receiver)
    if built is not None and built.startswith("torch.fx."):
        return True
    if not isinstance(receiver, ast.Name):
        return False
    function = sem.enclosing_function(receiver)
    while function is not None:
        arguments = function.args
        for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
            if argument.arg == receiver.id and argument.annotation is not None:
                annotation = sem.qualname(argument.annotation) or sem.dotted(argument.annotation)
                return bool(annotation) and "GraphModule" in annotation
        function = sem.enclosing_function(function)
    return False


# ---- TD304 ---------------------------------------------------------------------------------
TENSOR_FACTORIES = frozenset(
    {
        "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "arange",
        "linspace", "logspace", "eye", "tensor", "as_tensor", "from_numpy", "zeros_like",
        "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like",
        "tril", "triu", "tril_indices", "triu_indices", "stack", "cat", "Tensor", "FloatTensor",
        "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "BoolTensor", "ByteTensor",
        "normal", "bernoulli", "polar", "complex", "meshgrid", "cumsum", "exp", "log", "sqrt",
        "outer", "diag", "sin", "cos", "pow",
    }
)
# methods after which a value is no longer a tensor
NON_TENSOR_METHODS = frozenset(
    {"item", "tolist", "numpy", "size", "dim", "numel", "nelement", "element_size", "stride",
     "data_ptr", "storage", "untyped_storage", "is_contiguous", "get_device"}
)


def _is_tensor_expression(ctx: RuleContext, node: ast.AST, depth: int = 0) -> bool:
    """A value built by torch tensor factories (followed through local variables)."""
    sem = ctx.sem
    if depth > 6:
        return False
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
    if isinstance(node, ast.Name):
        definition = _reaching_assignment(ctx, node)
        return definition is not None and _is_tensor_expression(ctx, definition, depth + 1)
    if not isinstance(node, ast.Call):
        return False
    qualname = sem.qualname(node.func)
    if qualname is not None:
        head, _, last = qualname.rpartition(".")
        return head == "torch" and last in TENSOR_FACTORIES
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr not in NON_TENSOR_METHODS:
        return _is_tensor_expression(ctx, func.value, depth + 1)
    return False


def _reaching_assignment(ctx: RuleContext, name: ast.Name) -> ast.expr | None:
    """The value last assigned to `name` (by a plain `name = value`) before its statement."""
    sem = ctx.sem
    definition = flow_of(sem, function_scope(sem, name)).reaching(name.id, name)
    if definition is None or definition.value is None:
        return None
    node = definition.node
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
        node.targets[0], ast.Name
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
    for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=False):
        defaults[argument.arg] = default
    for argument in [*positional, *arguments.kwonlyargs]:
        if argument.arg != node.id:
            continue
        annotation = argument.annotation
        if annotation is not None:
            return isinstance(annotation, ast.Name) and annotation.id in NUMBER_ANNOTATIONS
        default = defaults.get(argument.arg)
        return (
            isinstance(default, ast.Constant)
            and isinstance(default.value, int | float)
            and not isinstance(default.value, bool)
        )
    return False


def _requires_grad(node: ast.AST) -> bool:
    for child in ast.walk(node):
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


@rule(
    "TD304",
    "tensor-attribute-not-buffer",
    Severity.WARNING,
    "A plain tensor stored on self in __init__: not moved by .to(), not in state_dict().",
    fixable=True,
)
def tensor_attribute_not_buffer(ctx: RuleContext) -> Iterator[Finding]:
    reported: set[tuple[int, str]] = set()
    for assign, target, method, cls in _self_assignments(ctx):
        if method.name != "__init__" or (id(cls), target.attr) in reported:
            continue
        if _method(cls, "_apply") is not None or _method(cls, "to") is not None:
            continue
        value = assign.value
        assert value is not None
        if not _is_tensor_expression(ctx, value) or _is_scalar_constant(ctx, value):
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
        yield _plain_tensor_finding(ctx, assign, target, _self_name(method) or "self")


def _handled_elsewhere(ctx: RuleContext, cls: ast.ClassDef, attr: str, assign: ast.AST) -> bool:
    """Re-assigned as a Parameter, registered, or moved by hand (`self.t.to(x.device)`)."""
    sem = ctx.sem
    for node, _ in _self_attribute_uses(cls, attr):
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
            if sem.enclosing_function(call) in _methods(cls):
                return True
    return False


# attributes a framework reads and moves itself: Lightning's `example_input_array` is the
# example batch it feeds to the model summary and graph logger, moved to the device by Lightning
FRAMEWORK_MOVED_ATTRIBUTES = frozenset({"example_input_array"})


def _init_only(ctx: RuleContext, cls: ast.ClassDef, attr: str) -> bool:
    """Read only while `__init__` builds the module (and named nowhere else in the file, other
    classes' own `self.<attr>` aside): where the tensor stays after `.to()` never matters."""
    uses = list(_self_attribute_uses(cls, attr))
    if any(method.name != "__init__" for _, method in uses):
        return False
    if not any(isinstance(node.ctx, ast.Load) for node, _ in uses):
        return False  # never read here: code elsewhere may use it
    return not _named_elsewhere(ctx, cls, attr, uses)


def _named_elsewhere(
    ctx: RuleContext, cls: ast.ClassDef, attr: str, uses: list[tuple[ast.Attribute, Function]]
) -> bool:
    """`.attr` appears outside `uses` (the class's own `self.attr`), other classes' own
    `self.attr` aside: code elsewhere may read it."""
    own = {id(node) for node, _ in uses}
    return any(
        id(node) not in own and not _other_class_self_attribute(ctx, cls, node)
        for node in _attributes_named(ctx.sem).get(attr, [])
    )


def _attributes_named(sem: Semantics) -> dict[str, list[ast.Attribute]]:
    """Every `x.<name>` expression of the file by name, indexed once per file."""
    index = sem.derived.get("modules:attributes-by-name")
    if index is None:
        index = {}
        for node in sem.parents:
            if isinstance(node, ast.Attribute):
                index.setdefault(node.attr, []).append(node)
        sem.derived["modules:attributes-by-name"] = index
    return index


def _other_class_self_attribute(ctx: RuleContext, cls: ast.ClassDef, node: ast.Attribute) -> bool:
    """`self.<attr>` inside a method of another class that does not derive from `cls`: that
    class's own attribute, not a use of this one."""
    sem = ctx.sem
    method = sem.enclosing_function(node)
    if method is None or not isinstance(node.value, ast.Name):
        return False
    if node.value.id != _self_name(method):
        return False
    owner = sem.parent(method)
    if not isinstance(owner, ast.ClassDef) or owner is cls:
        return False
    return cls.name not in _ancestors_in_file(sem, owner)


def _reassigned_after_init(ctx: RuleContext, cls: ast.ClassDef, attr: str) -> bool:
    """`self.masks = torch.empty(0)` in `__init__`, replaced in `forward()`: a placeholder for
    state the method that replaces it creates (on the device it chooses there). An augmented
    assignment (`self.total += x`) updates the old tensor in place: it does not count."""
    for node, method in _self_attribute_uses(cls, attr):
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
    for node, method in _self_attribute_uses(cls, attr):
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
        f"`{self_name}.register_buffer(\"{target.attr}\", ...)`"
    )
    fix = None
    if isinstance(assign, ast.Assign):
        fix = Fix(
            f"Register `{target.attr}` as a buffer",
            (
                ctx.replace(
                    assign,
                    f"{self_name}.register_buffer(\"{target.attr}\", {ctx.doc.source_of(value)})",
                ),
            ),
            safe=False,
        )
    return ctx.finding("TD304", assign, message, fix)


# ---- TD305 / TD306: what a loss is fed -----------------------------------------------------
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
    {"view", "reshape", "flatten", "squeeze", "unsqueeze", "permute", "transpose", "contiguous",
     "float", "double", "half", "to", "cuda", "cpu", "view_as", "reshape_as", "type_as"}
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


def _loss_calls(ctx: RuleContext) -> list[LossCall]:
    sem = ctx.sem
    cached = sem.derived.get("modules:loss_calls")
    if cached is not None:
        return cached
    found: list[LossCall] = []
    criteria = _names_assigned_losses(sem)
    last_parts = {name.rsplit(".", 1)[-1] for name in criteria}
    for call in sem.calls:
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
    sem.derived["modules:loss_calls"] = found
    return found


def _names_assigned_losses(sem: Semantics) -> set[str]:
    """Names and attributes this file assigns a loss module to (`criterion = nn.BCELoss()`)."""
    names: set[str] = set()
    for assign in sem.assigns:
        if not isinstance(assign, ast.Assign | ast.AnnAssign) or assign.value is None:
            continue
        value = _without_moves(assign.value)
        if not isinstance(value, ast.Call):
            continue
        func = value.func
        last = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if not last.endswith("Loss"):
            continue
        built = _constructor_name(sem, value)
        if built is None or not built.startswith("torch.nn.") or not built.endswith("Loss"):
            continue
        targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
        for target in targets:
            dotted = sem.dotted(target)
            if dotted is not None:
                names.add(dotted)
    return names


def _assignments_by_target(sem: Semantics) -> dict[str, list[ast.Assign | ast.AnnAssign]]:
    """Single-target assignments by their dotted target, computed once per document."""
    index = sem.derived.get("modules:assignments")
    if index is None:
        index = {}
        for assign in sem.assigns:
            if not isinstance(assign, ast.Assign | ast.AnnAssign) or assign.value is None:
                continue
            targets = assign.targets if isinstance(assign, ast.Assign) else [assign.target]
            if len(targets) != 1:
                continue
            dotted = sem.dotted(targets[0])
            if dotted is not None:
                index.setdefault(dotted, []).append(assign)
        sem.derived["modules:assignments"] = index
    return index


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


def _origin(
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
                _could_originate(ctx, a.value)
                for a in _assignments_by_target(sem).get(expr.id, [])
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
        return _origin(ctx, definition.value, (*hops, expr), depth + 1)
    return None


def _could_originate(ctx: RuleContext, value: ast.expr | None) -> bool:
    """A cheap test before following a variable: its value is an activation or known model
    output by itself, or another variable."""
    if value is None:
        return False
    while isinstance(value, ast.Subscript | ast.Call) and not (
        isinstance(value, ast.Call) and not _is_shape_call(ctx, value)
    ):
        value = value.value if isinstance(value, ast.Subscript) else value.func.value  # type: ignore[attr-defined]
    if isinstance(value, ast.Name):
        return True
    return _origin(ctx, value, depth=99) is not None


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


def definition_of(ctx: RuleContext, node: ast.AST) -> ast.Call | None:
    """The constructor call assigned to a name or `self.attr` (see `assigned_call`)."""
    return assigned_call(ctx.sem, node)


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
        return ctx.sem.derived[key]
    ctx.sem.derived[key] = None  # recursion guard
    forward = _method(cls, "forward")
    result: str | None = None
    if forward is not None:
        kinds: set[str | None] = set()
        for node in own_nodes(forward):
            if isinstance(node, ast.Return):
                if node.value is None:
                    kinds.add(None)
                    continue
                origin = _origin(ctx, node.value)
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


def _loads_of(ctx: RuleContext, name: str, scope: ast.AST) -> int:
    return sum(
        1
        for node in own_nodes(scope)
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)
    )


def _reusable_at(ctx: RuleContext, expr: ast.expr, source_at: ast.AST, use_at: ast.AST) -> bool:
    """`expr` (made of names and attributes only) means the same at `use_at` as at `source_at`."""
    sem = ctx.sem
    flow = flow_of(sem, function_scope(sem, use_at))
    if function_scope(sem, source_at) is not function_scope(sem, use_at):
        return False
    for node in ast.walk(expr):
        if isinstance(node, ast.Call | ast.Lambda | ast.NamedExpr | ast.Await):
            return False
        if isinstance(node, ast.Name):
            before = flow.reaching(node.id, source_at)
            if before is None or before is not flow.reaching(node.id, use_at):
                return False
    return isinstance(expr, ast.Name | ast.Attribute | ast.Subscript)


def _remove_activation_fix(
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


@rule(
    "TD305",
    "softmax-before-cross-entropy",
    Severity.WARNING,
    "cross_entropy/NLLLoss fed softmax probabilities: softmax is applied twice, training stalls.",
    fixable=True,
)
def softmax_before_cross_entropy(ctx: RuleContext) -> Iterator[Finding]:
    for loss in _loss_calls(ctx):
        if loss.loss not in ("cross_entropy", "nll"):
            continue
        origin = _origin(ctx, loss.input)
        if origin is None or origin.kind != "softmax":
            continue
        where = "the model's output, which ends in softmax," if origin.from_model else (
            "a softmax output"
        )
        if loss.loss == "cross_entropy":
            message = (
                f"cross-entropy is fed {where} but applies log-softmax itself: it computes "
                "log_softmax(softmax(logits)), the loss can never reach 0 and the gradients "
                "shrink as the model grows confident, so training stalls; pass the logits"
            )
            fix = _remove_activation_fix(ctx, loss, origin, "softmax", "the logits")
        else:
            message = (
                f"NLLLoss is fed {where}: it expects log-probabilities and computes "
                "-mean(p[target]) from probabilities, a different, bounded objective; use "
                "`log_softmax` (or pass the logits to `cross_entropy`)"
            )
            fix = _log_softmax_fix(ctx, origin)
        yield ctx.finding("TD305", loss.call, message, fix)


def _log_softmax_fix(ctx: RuleContext, origin: Origin) -> Fix | None:
    if origin.from_model or not isinstance(origin.node, ast.Call):
        return None
    if origin.hops:
        if len(origin.hops) != 1:
            return None
        name = origin.hops[0]
        scope = function_scope(ctx.sem, name)
        if _loads_of(ctx, name.id, scope) != 1:
            return None  # the probabilities are used elsewhere too
    func = origin.node.func
    sem = ctx.sem
    edit: Edit | None = None
    if isinstance(func, ast.Attribute) and func.attr == "softmax":
        edit = _rename_attribute(ctx, func, "log_softmax")
    elif isinstance(func, ast.Call):
        name = nn_class_name(sem, func.func)
        if name == "Softmax" and isinstance(func.func, ast.Attribute):
            edit = _rename_attribute(ctx, func.func, "LogSoftmax")
    if edit is None:
        return None
    return Fix("Use `log_softmax`", (edit,), safe=False)


@rule(
    "TD306",
    "sigmoid-bce-mismatch",
    Severity.WARNING,
    "BCEWithLogitsLoss fed a sigmoid output (sigmoid twice), or BCELoss fed raw logits.",
    fixable=True,
)
def sigmoid_bce_mismatch(ctx: RuleContext) -> Iterator[Finding]:
    for loss in _loss_calls(ctx):
        if loss.loss not in ("bce_with_logits", "bce"):
            continue
        origin = _origin(ctx, loss.input)
        if loss.loss == "bce_with_logits":
            if origin is None or origin.kind != "sigmoid":
                continue
            where = "the model's output, which ends in sigmoid," if origin.from_model else (
                "a sigmoid output"
            )
            message = (
                f"BCEWithLogitsLoss is fed {where} but applies sigmoid itself: the predicted "
                "probability is squeezed into (0.5, 0.73), the loss of a negative example "
                "never falls below log(2) and the model cannot learn; pass the logits"
            )
            fix = _remove_activation_fix(ctx, loss, origin, "sigmoid", "the logits")
            yield ctx.finding("TD306", loss.call, message, fix)
            continue
        if not _is_raw_logits(ctx, loss.input, origin):
            continue
        message = (
            "BCELoss expects probabilities but is fed raw logits: any value outside [0, 1] "
            "raises \"RuntimeError: all elements of input should be between 0 and 1\"; use "
            "`BCEWithLogitsLoss` / `binary_cross_entropy_with_logits` on the logits"
        )
        yield ctx.finding("TD306", loss.call, message, _with_logits_fix(ctx, loss))


def _is_raw_logits(ctx: RuleContext, expr: ast.expr, origin: Origin | None) -> bool:
    if origin is not None:
        return origin.kind == "logits"
    # a variable the code itself calls logits, not computed by an activation we can see
    node = expr
    while isinstance(node, ast.Subscript):
        node = node.value
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in SHAPE_METHODS
    ):
        node = node.func.value
    dotted = ctx.sem.dotted(node)
    if dotted is None:
        return False
    last = dotted.rsplit(".", 1)[-1].lower()
    return "logit" in last and "prob" not in last


def _with_logits_fix(ctx: RuleContext, loss: LossCall) -> Fix | None:
    func = loss.call.func
    if loss.functional and isinstance(func, ast.Attribute):
        return Fix(
            "Use `binary_cross_entropy_with_logits`",
            (_rename_attribute(ctx, func, "binary_cross_entropy_with_logits"),),
            safe=False,
        )
    constructor = loss.inline_constructor
    if constructor is not None and isinstance(constructor.func, ast.Attribute):
        return Fix(
            "Use `BCEWithLogitsLoss`",
            (_rename_attribute(ctx, constructor.func, "BCEWithLogitsLoss"),),
            safe=False,
        )
    return None


def _rename_attribute(ctx: RuleContext, node: ast.Attribute, attr: str) -> Edit:
    """Replace `.name` of `value.name` (the dot and the name only) by `.attr`."""
    value = ctx.doc.span_of(node.value)
    whole = ctx.doc.span_of(node)
    return Edit(Span(value.end_line, value.end_col, whole.end_line, whole.end_col), f".{attr}")
