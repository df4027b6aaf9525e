"""TD701 torchvision-pretrained: `pretrained=`/`pretrained_backbone=` on a torchvision model
builder (deprecated since torchvision 0.13): use `weights=`."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Finding, Fix, Severity, rule
from ...semantics import Semantics
from .call_arguments import has_double_star, is_constant, keyword_named
from .symbols import (
    DEPENDS,
    NO_WEIGHTS,
    TORCHVISION_LEGACY_WEIGHTS,
    TORCHVISION_MIN_TORCH,
    TORCHVISION_SUBPACKAGES,
)

ANY_BUILDER = "<a builder chosen at run time>"


@rule(
    "TD701",
    "torchvision-pretrained",
    Severity.WARNING,
    "`pretrained=`/`pretrained_backbone=` on a torchvision model builder (deprecated since "
    "torchvision 0.13): use `weights=`.",
    fixable=True,
    # every finding is at a `pretrained=`/`pretrained_backbone=` keyword, or at a positional
    # bool of a call of a listed builder, which spells the builder's name (called_names)
    spells=frozenset({"pretrained", "pretrained_backbone"})
    | frozenset(builder for _, builder in TORCHVISION_LEGACY_WEIGHTS),
)
def torchvision_pretrained(ctx: RuleContext) -> Iterator[Finding]:
    if ctx.torch_version < TORCHVISION_MIN_TORCH:
        return
    sem = ctx.sem
    # a call's qualname starts with `torchvision.models.` only through an import of a
    # torchvision name: most files have none, and skip the look at every qualname
    imports_torchvision = "torchvision" in sem.imported_packages()
    if imports_torchvision:
        for qualname, calls in sem.calls_by_qualname.items():
            if qualname.startswith("torchvision.models."):
                key = _builder_key(qualname)
                if key is None:
                    continue
                for call in calls:
                    yield from _pretrained_findings(ctx, call, key, positional=True)
    for call in sem.calls_by_qualname.get("torch.hub.load", ()):
        key = _hub_builder_key(call)
        if key is not None:
            yield from _pretrained_findings(ctx, call, key, positional=False)
    # a looked-up builder resolves to `torchvision.models`: only through a torchvision import
    # (asked before the scans of the text)
    if imports_torchvision and ("__dict__" in ctx.doc.text or "getattr" in ctx.doc.text):
        for call in sem.calls:
            if not call.keywords:  # only `pretrained=` is reported on a looked-up builder
                continue
            key = _builder_table_key(sem, call)
            if key is not None:
                yield from _pretrained_findings(ctx, call, key, positional=False)


def _builder_table_key(sem: Semantics, call: ast.Call) -> tuple[str, str] | None:
    """A builder looked up by name: `models.__dict__[args.arch](pretrained=True)`, the
    ImageNet-example idiom, or `getattr(torchvision.models, name)(pretrained=True)`, also
    through a name bound once to the lookup (`builder = getattr(models, name)`)."""
    func = call.func
    if isinstance(func, ast.Name):
        values = sem.assigned_values(func.id)
        if len(values) != 1 or not isinstance(values[0], ast.Subscript | ast.Call):
            return None
        func = values[0]
    if (
        isinstance(func, ast.Subscript)
        and isinstance(func.value, ast.Attribute)
        and func.value.attr == "__dict__"
    ):
        module_node, name = func.value.value, func.slice
    elif (
        isinstance(func, ast.Call)
        and isinstance(func.func, ast.Name)
        and func.func.id == "getattr"
        and "getattr" not in sem.imports
        and len(func.args) >= 2
        and not func.keywords
    ):
        module_node, name = func.args[0], func.args[1]
    else:
        return None
    module = sem.qualname(module_node)
    if module is None or (
        module != "torchvision.models" and not module.startswith("torchvision.models.")
    ):
        return None
    namespace = module.split(".")[2] if module.count(".") >= 2 else ""
    namespace = namespace if namespace in TORCHVISION_SUBPACKAGES else ""
    if isinstance(name, ast.Constant) and isinstance(name.value, str):
        key = (namespace, name.value)
        return key if key in TORCHVISION_LEGACY_WEIGHTS else None
    return (namespace, ANY_BUILDER)


def _builder_key(qualname: str) -> tuple[str, str] | None:
    parts = qualname[len("torchvision.models.") :].split(".")
    namespace = parts[0] if len(parts) > 1 and parts[0] in TORCHVISION_SUBPACKAGES else ""
    key = (namespace, parts[-1])
    return key if key in TORCHVISION_LEGACY_WEIGHTS else None


def _hub_builder_key(call: ast.Call) -> tuple[str, str] | None:
    """`torch.hub.load("pytorch/vision", "resnet50", pretrained=True)`."""
    if len(call.args) < 2:
        return None
    repo, name = call.args[0], call.args[1]
    if not (isinstance(repo, ast.Constant) and isinstance(repo.value, str)):
        return None
    if not repo.value.split(":", 1)[0].rstrip("/") == "pytorch/vision":
        return None
    if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
        return None
    key = ("", name.value)
    return key if key in TORCHVISION_LEGACY_WEIGHTS else None


def _pretrained_findings(
    ctx: RuleContext, call: ast.Call, key: tuple[str, str], *, positional: bool
) -> Iterator[Finding]:
    legacy = TORCHVISION_LEGACY_WEIGHTS.get(key, (DEPENDS, DEPENDS))
    builder = f"`{key[1]}`" if key[1] != ANY_BUILDER else "this torchvision builder"
    arguments: list[tuple[ast.AST, str, str, str | None]] = []  # node, old, new, legacy value
    pretrained = keyword_named(call, "pretrained")
    if pretrained is not None:
        arguments.append((pretrained, "pretrained", "weights", legacy[0]))
    elif (
        positional
        and call.args
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, bool)
    ):
        arguments.append((call.args[0], "pretrained", "weights", legacy[0]))
    backbone = keyword_named(call, "pretrained_backbone")
    if backbone is not None:
        arguments.append(
            (
                backbone,
                "pretrained_backbone",
                "weights_backbone",
                legacy[1] if len(legacy) > 1 else None,
            )
        )
    for node, old, new, value in arguments:
        passed = node.value if isinstance(node, ast.keyword) else node
        fix = _pretrained_fix(ctx, call, node, passed, new, value)
        shown = "a positional `True`/`False`" if not isinstance(node, ast.keyword) else f"`{old}=`"
        if is_constant(passed, True) and value not in (None, DEPENDS, NO_WEIGHTS):
            advice = (
                f'`{new}="{value}"` loads the same weights (`"DEFAULT"` picks the newest, '
                "which can differ)"
            )
        elif is_constant(passed, False):
            advice = f"`{new}=None` is the same"
        else:
            advice = f"pass `{new}=` a weights enum, its name as a string, or None"
        message = (
            f"{shown} on {builder} is deprecated since torchvision 0.13 (it warns on every "
            f"call): {advice}"
        )
        yield ctx.finding("TD701", node, message, fix)


def _pretrained_fix(
    ctx: RuleContext,
    call: ast.Call,
    node: ast.AST,
    passed: ast.AST,
    new: str,
    value: str | None,
) -> Fix | None:
    if keyword_named(call, new) is not None or has_double_star(call):
        return None
    if not isinstance(node, ast.keyword) and len(call.args) != 1:
        return None  # a keyword cannot stand before the remaining positional arguments
    if is_constant(passed, False):
        replacement = f"{new}=None"
    elif is_constant(passed, True) and value not in (None, DEPENDS, NO_WEIGHTS):
        replacement = f'{new}="{value}"'
    else:
        return None
    return Fix(f"Use `{replacement}`", (ctx.replace(node, replacement),))
