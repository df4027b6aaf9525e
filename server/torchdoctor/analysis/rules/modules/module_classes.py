"""The nn.Module classes of a file: their bases, methods, the layers they assign to `self` and
where those attributes are used."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ...assigned_calls import assigned_call, single_assignments_to, without_moves
from ...context import RuleContext
from ...function_body import own_nodes
from ...semantics import MODULE_BASES, Function, Semantics, end_position, position, starting_within

# torch.nn classes that are not modules
NON_MODULE_NN_CLASSES = frozenset(
    {"Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer"}
)
# torch.nn modules without parameters, buffers or a train/eval difference: a plain list of them
# loses nothing
STATELESS_NN_CLASSES = frozenset(
    {
        "ReLU",
        "ReLU6",
        "GELU",
        "SiLU",
        "Mish",
        "ELU",
        "SELU",
        "CELU",
        "LeakyReLU",
        "Sigmoid",
        "Tanh",
        "Softmax",
        "LogSoftmax",
        "Softmin",
        "Softplus",
        "Softsign",
        "Hardtanh",
        "Hardswish",
        "Hardsigmoid",
        "Tanhshrink",
        "Softshrink",
        "Hardshrink",
        "LogSigmoid",
        "Threshold",
        "GLU",
        "Identity",
        "Flatten",
        "Unflatten",
        "Upsample",
        "PixelShuffle",
        "PixelUnshuffle",
        "MaxPool1d",
        "MaxPool2d",
        "MaxPool3d",
        "AvgPool1d",
        "AvgPool2d",
        "AvgPool3d",
        "AdaptiveAvgPool1d",
        "AdaptiveAvgPool2d",
        "AdaptiveAvgPool3d",
        "AdaptiveMaxPool1d",
        "AdaptiveMaxPool2d",
        "AdaptiveMaxPool3d",
        "ZeroPad2d",
        "ConstantPad1d",
        "ConstantPad2d",
        "ConstantPad3d",
        "ReflectionPad1d",
        "ReflectionPad2d",
        "ReplicationPad1d",
        "ReplicationPad2d",
        "ChannelShuffle",
        "CosineSimilarity",
        "PairwiseDistance",
    }
)


def self_parameter(function: Function) -> str | None:
    arguments = function.args
    first = arguments.posonlyargs or arguments.args
    return first[0].arg if first else None


def methods_in(cls: ast.ClassDef) -> list[Function]:
    # exact type tests: the parser makes no subclasses, and a union's isinstance costs more
    return [s for s in cls.body if type(s) in _METHOD_TYPES]  # type: ignore[misc]  # a method: type() tested


def method_named(cls: ast.ClassDef, name: str) -> Function | None:
    # the class body read in place, no list of its methods made: asked of every module class
    for statement in cls.body:
        if type(statement) in _METHOD_TYPES and statement.name == name:  # type: ignore[attr-defined]  # a method: type() tested
            return statement  # type: ignore[return-value]  # a method: type() tested
    return None


_METHOD_TYPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef})


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


def module_classes_of(sem: Semantics) -> list[ast.ClassDef]:
    """nn.Module subclasses of this file (every class of that name, in source order).
    Memoised per semantics: TD301 and `self_assignments` (TD302, TD304) ask for every file.
    The list is shared: callers read it, never change it."""
    found: list[ast.ClassDef] | None = sem.derived.get("modules:module-classes")
    if found is None:
        module_classes = sem.module_classes
        found = sem.derived["modules:module-classes"] = [
            cls
            for cls in sem.classes
            if cls.name in module_classes and _has_module_base(sem, cls)
        ]
    return found


def _has_module_base(sem: Semantics, cls: ast.ClassDef) -> bool:
    # a loop, not `any` over a generator: asked of every class named as a model class
    for base in cls.bases:
        if _is_module_base(sem, base):
            return True
    return False


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


def constructor_name(sem: Semantics, value: ast.AST) -> str | None:
    """The class a value is built from: `nn.Linear(...)`, `Net(...).to(device)` → its name."""
    value = without_moves(value)
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
    sem = sem.whole  # a fact of the file, even for a view focused on some blocks
    cached: FileFacts | None = sem.derived.get("modules:facts")
    if cached is not None:
        return cached
    facts = FileFacts()
    for cls in sem.classes:
        facts.local_classes.setdefault(cls.name, []).append(cls)
    sem.derived["modules:facts"] = facts
    return facts


def _is_parameter(sem: Semantics, function: Function, name: str) -> bool:
    return name in _parameters_of(sem, function)


def _parameters_of(sem: Semantics, function: Function) -> frozenset[str]:
    """Every parameter name of `function`: memoised per version, since `built_from` asks for
    each use of a name in it (a training function calls `criterion` and `model` every step)."""
    memo: dict[int, frozenset[str]] = sem.whole.derived.setdefault("modules:parameters", {})
    found = memo.get(id(function))
    if found is None:
        arguments = function.args
        every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        every += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
        found = memo[id(function)] = frozenset(argument.arg for argument in every)
    return found


def built_from(sem: Semantics, node: ast.AST) -> str | None:
    """The class a name or `self.attr` is built from, when this file shows it."""
    dotted = sem.dotted(node)
    if isinstance(node, ast.Name) and dotted is not None:
        function = sem.enclosing_function(node)
        assigns = single_assignments_to(sem, dotted)
        if function is not None and _is_parameter(sem, function, dotted):
            if not any(sem.enclosing_function(a) is function for a in assigns):
                return None  # whatever the caller passes
        else:
            # every assignment in the file agrees: no need to follow the data flow
            built = _constructors_assigned(sem, dotted, assigns)
            if len(built) == 1 and None not in built:
                return next(iter(built))
    call = assigned_call(sem, node)
    return constructor_name(sem, call) if call is not None else None


def _constructors_assigned(
    sem: Semantics, dotted: str, assigns: list[ast.Assign | ast.AnnAssign]
) -> frozenset[str | None]:
    """The classes the file's assignments to `dotted` build (`assigns`: all of them)."""
    # asked for every use of a name, and a script assigns `model` or `x` dozens of times
    whole = sem.whole
    by_name: dict[str, frozenset[str | None]] | None = whole.derived.get(_BY_NAME)
    if by_name is None:
        by_name = whole.derived[_BY_NAME] = {}
    found = by_name.get(dotted)
    if found is None:
        found = by_name[dotted] = frozenset(_constructors_of(sem, assigns))
    return found


_BY_NAME = "modules:constructors-by-name"


def _constructors_of(sem: Semantics, assigns: list[ast.Assign | ast.AnnAssign]) -> set[str | None]:
    memo = sem.node_memo("modules:constructor")
    built: set[str | None] = set()
    for assign in assigns:
        value = assign.value
        if value is None:
            continue
        entry = memo.get(id(value))
        if entry is None or entry[0] is not value:
            entry = memo[id(value)] = (value, constructor_name(sem, value))
        built.add(entry[1])
    return built


def local_class(sem: Semantics, name: str) -> ast.ClassDef | None:
    classes = facts_of(sem).local_classes.get(name, [])
    return classes[0] if len(classes) == 1 else None


def is_super_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


def ancestors_in_file(sem: Semantics, cls: ast.ClassDef) -> set[str]:
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


SelfAssignment = tuple[ast.Assign | ast.AnnAssign, ast.Attribute, Function, ast.ClassDef]


def self_assignments(ctx: RuleContext) -> list[SelfAssignment]:
    """`self.<attr> = value` in the methods of nn.Module subclasses, in source order."""
    sem = ctx.sem
    cached: list[SelfAssignment] | None = sem.derived.get(_SELF_ASSIGNMENTS)
    if cached is None:
        cached = sem.derived[_SELF_ASSIGNMENTS] = _self_assignments_where(sem, None)
    return cached


def self_assignments_of_values(
    ctx: RuleContext, wanted: Callable[[ast.expr], bool]
) -> list[SelfAssignment]:
    """Those of `self_assignments` whose value `wanted` answers yes for, in source order: the
    memo's when made, else found without it, the value asked before the target and the method
    (a rule that wants few values, asked before any rule wants them all, makes no memo)."""
    cached: list[SelfAssignment] | None = ctx.sem.derived.get(_SELF_ASSIGNMENTS)
    if cached is not None:
        return [entry for entry in cached if wanted(entry[0].value)]  # type: ignore[arg-type]  # an assignment with a value
    return _self_assignments_where(ctx.sem, wanted)


_SELF_ASSIGNMENTS = "modules:self-assignments"


def _self_assignments_where(
    sem: Semantics, wanted: Callable[[ast.expr], bool] | None
) -> list[SelfAssignment]:
    """`self.<attr> = value` in the methods of nn.Module subclasses, in source order (with
    `wanted`, only those whose value it answers yes for)."""
    module_classes = module_classes_of(sem)
    found: list[SelfAssignment] = []
    if not module_classes:
        return found  # no module class: nothing to walk
    classes = {id(cls) for cls in module_classes}
    # one class per test, the exact type matching first (faster than a test against a union):
    # asked of every assignment in the module classes, most of them to plain names in `forward`
    for assign in _assigns_inside(sem.assigns, module_classes):
        if isinstance(assign, ast.Assign):
            targets = assign.targets
            if len(targets) != 1:
                continue
            target, value = targets[0], assign.value
        elif isinstance(assign, ast.AnnAssign) and assign.value is not None:
            target, value = assign.target, assign.value
        else:
            continue
        if wanted is not None and not wanted(value):
            continue
        if not isinstance(target, ast.Attribute) or not isinstance(target.value, ast.Name):
            continue
        method = sem.enclosing_function(assign)
        if method is None or target.value.id != self_parameter(method):
            continue
        cls = sem.parent(method)
        if isinstance(cls, ast.ClassDef) and id(cls) in classes:
            found.append((assign, target, method, cls))
    return found


def _assigns_inside(
    assigns: list[ast.Assign | ast.AnnAssign | ast.AugAssign], classes: list[ast.ClassDef]
) -> Iterator[ast.Assign | ast.AnnAssign | ast.AugAssign]:
    """Of `assigns` (in source order), those inside `classes` (in source order), in source
    order: found by position, class by class, rather than by asking each of the file's."""
    spans: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for cls in classes:
        start, end = position(cls), end_position(cls)
        if spans and start < spans[-1][1]:  # a class inside the one before
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    for start, end in spans:
        yield from starting_within(assigns, start, end)


def is_module_constructor(ctx: RuleContext, node: ast.AST, *, stateful: bool) -> bool:
    """A call that builds a fresh module (`nn.Linear(...)`, `Block(...)`, `resnet18()`).

    With `stateful`, only modules with parameters, buffers or a train/eval difference count.
    """
    sem = ctx.sem
    if isinstance(node, ast.IfExp):
        return is_module_constructor(ctx, node.body, stateful=stateful) and (
            is_module_constructor(ctx, node.orelse, stateful=False)
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


def self_attribute_uses(
    sem: Semantics, cls: ast.ClassDef, attr: str
) -> list[tuple[ast.Attribute, Function]]:
    """`self.<attr>` expressions in the methods of `cls`, in source order."""
    return _self_attributes_by_name(sem, cls).get(attr, [])


def _self_attributes_by_name(
    sem: Semantics, cls: ast.ClassDef
) -> dict[str, list[tuple[ast.Attribute, Function]]]:
    """Every `self.<attr>` of the class's methods by attribute, from one walk per class: the
    rules ask about each attribute a module assigns, and walked the methods for each."""
    cache: dict[int, dict[str, list[tuple[ast.Attribute, Function]]]] = sem.derived.setdefault(
        "modules:self-attributes", {}
    )
    found = cache.get(id(cls))
    if found is None:
        found = cache[id(cls)] = {}
        for method in methods_in(cls):
            self_name = self_parameter(method)
            for node in own_nodes(method):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == self_name
                ):
                    found.setdefault(node.attr, []).append((node, method))
    return found


def named_elsewhere(
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
    if node.value.id != self_parameter(method):
        return False
    owner = sem.parent(method)
    if not isinstance(owner, ast.ClassDef) or owner is cls:
        return False
    return cls.name not in ancestors_in_file(sem, owner)
