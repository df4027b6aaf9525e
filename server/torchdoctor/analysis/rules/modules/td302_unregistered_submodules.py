"""TD302 unregistered-submodules: Submodules kept in a plain list or dict: not in parameters(),
not moved by .to(), not saved."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from ...context import RuleContext
from ...dataflow import flow_of
from ...findings import Finding, Fix, Severity, rule
from ...function_body import own_nodes
from ...semantics import Function, Semantics, end_position, position, starting_within
from .module_classes import (
    is_module_constructor,
    methods_in,
    named_elsewhere,
    nn_class_name,
    self_assignments_of_values,
    self_attribute_uses,
    self_parameter,
)

# the values that may hold submodules in a plain container: a display or comprehension, a
# local name, or a call of a plain name (`list()`, `dict(...)`)
CANDIDATE_VALUES = frozenset({ast.List, ast.Tuple, ast.ListComp, ast.Dict, ast.DictComp, ast.Name})
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
    for assign, target, method, cls in self_assignments_of_values(ctx, _may_hold_modules):
        value = assign.value
        assert value is not None
        container = _module_container(ctx, cls, method, target.attr, value)
        if container is not None:
            yield _unregistered_finding(ctx, cls, target, value, container)


def _may_hold_modules(value: ast.expr) -> bool:
    """A value that may hold submodules in a plain container. Exact type tests (the parser
    makes no subclasses): asked of every `self.x = ...` of the module classes, most of them a
    layer (`nn.Linear(...)`), which passes neither."""
    kind = type(value)
    return kind in CANDIDATE_VALUES or (kind is ast.Call and type(value.func) is ast.Name)  # type: ignore[attr-defined]  # type() tested


def _holds_modules(ctx: RuleContext, elements: list[ast.expr]) -> bool:
    if not elements or any(isinstance(e, ast.Starred) for e in elements):
        return False
    if not all(is_module_constructor(ctx, e, stateful=False) for e in elements):
        return False
    return any(is_module_constructor(ctx, e, stateful=True) for e in elements)


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
    for node, _ in self_attribute_uses(ctx.sem, cls, attr):
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
    uses = list(self_attribute_uses(ctx.sem, cls, attr))
    if any(method.name not in building for _, method in uses):
        return False
    return not named_elsewhere(ctx, cls, attr, uses)


def _building_methods(cls: ast.ClassDef) -> set[str]:
    """`__init__` and the methods of `cls` that are called only from building methods."""
    callers: dict[str, set[str]] = {}
    for method in methods_in(cls):
        self_name = self_parameter(method)
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
        for method in methods_in(cls):
            name = method.name
            if name in building or name.startswith("__") or name == "forward":
                continue
            called_from = callers.get(name)
            if called_from and called_from <= building:
                building.add(name)
                changed = True
    return building


def _is_empty(value: ast.expr, literal: type[ast.List] | type[ast.Dict], builtin: str) -> bool:
    if isinstance(value, ast.List | ast.Dict) and isinstance(value, literal):
        return not (value.elts if isinstance(value, ast.List) else value.keys)
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
    return isinstance(key, ast.Call) and isinstance(key.func, ast.Name) and key.func.id == "str"


def _filled_with_modules(ctx: RuleContext, cls: ast.ClassDef, attr: str, kind: str) -> bool:
    """`self.blocks = []` followed by `self.blocks.append(Block())` (or `self.d[k] = ...`)."""
    sem = ctx.sem
    found = False
    for node, _ in self_attribute_uses(ctx.sem, cls, attr):
        parent = sem.parent(node)
        if (
            kind == "list"
            and isinstance(parent, ast.Attribute)
            and parent.attr
            in (
                "append",
                "insert",
            )
        ):
            call = sem.parent(parent)
            if isinstance(call, ast.Call) and call.func is parent and call.args:
                added = call.args[-1]
                if not is_module_constructor(ctx, added, stateful=False):
                    return False
                found = found or is_module_constructor(ctx, added, stateful=True)
        elif kind == "dict" and isinstance(parent, ast.Subscript) and parent.value is node:
            assign = sem.parent(parent)
            if isinstance(assign, ast.Assign) and parent in assign.targets:
                if not is_module_constructor(ctx, assign.value, stateful=False):
                    return False
                found = found or is_module_constructor(ctx, assign.value, stateful=True)
    return found


def _local_list_of_modules(ctx: RuleContext, method: Function, value: ast.Name) -> str | None:
    """`layers = []`, `layers.append(nn.Linear(...))` in a loop, then `self.layers = layers`."""
    sem = ctx.sem
    if not _appended_to_in(sem, method, value.id):
        return None  # `self.dim = dim`: most names are no list, and the data flow costs more
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
            if not is_module_constructor(ctx, added, stateful=False):
                return None
            found = found or is_module_constructor(ctx, added, stateful=True)
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


def _appended_to_in(sem: Semantics, method: Function, name: str) -> bool:
    """`name.append(...)` or `name.insert(...)` runs in the method's own body: looked for
    among the file's calls of those methods that lie within the method's lines."""
    start, end = position(method), end_position(method)
    for attr in ("append", "insert"):
        for call in starting_within(sem.whole.calls_by_attr.get(attr, []), start, end):
            func = call.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == name
                and call.args
                and sem.enclosing_function(call) is method
            ):
                return True
    return False


def _uses_methods(ctx: RuleContext, cls: ast.ClassDef, attr: str, methods: frozenset[str]) -> bool:
    for node, _ in self_attribute_uses(ctx.sem, cls, attr):
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
