"""API rules: calls that torch, torchvision or transformers removed, renamed or deprecated,
unsafe loading, checkpointing without an explicit mode, and numerically unstable formulas.

The facts behind them (what was removed when, what replaces it) live in `api_symbols.py`.
Rules whose truth depends on the torch version read `ctx.torch_version`.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..call_edits import add_keyword, remove_arguments
from ..context import RuleContext
from ..findings import Edit, Finding, Fix, Severity, Span, rule
from ..semantics import Semantics
from ..training import training_of
from .api_symbols import (
    AMP_DEPRECATED_IN,
    AMP_SYMBOLS,
    COMPILE_KEYWORD_FIXES,
    COMPILE_KEYWORDS,
    COMPILE_MODES,
    DEPENDS,
    DEPRECATED,
    LEGACY_REDUCTION_LOSSES,
    NO_WEIGHTS,
    PRIVATE_ALIASES,
    PRIVATE_MODULES,
    REMOVED,
    REMOVED_MODULES,
    TORCHVISION_LEGACY_WEIGHTS,
    TORCHVISION_MIN_TORCH,
    TORCHVISION_SUBPACKAGES,
    TRAINING_ARGUMENT_CLASSES,
    TRAINING_ARGUMENT_RENAMES,
    ApiSymbol,
    Version,
)

TORCH_LOAD = ("torch.load", "torch.serialization.load")
HUB_LOAD_STATE_DICT = ("torch.hub.load_state_dict_from_url",)
CHECKPOINT = ("torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential")
VARIABLE = ("torch.autograd.Variable", "torch.autograd.variable.Variable")
V2_TO_TENSOR = (
    "torchvision.transforms.v2.ToTensor",
    "torchvision.transforms.v2._deprecated.ToTensor",
)
V2_COMPOSE = ("torchvision.transforms.v2.Compose", "torchvision.transforms.v2._container.Compose")
ANY_BUILDER = "<a builder chosen at run time>"
# Removed functions whose name is a module now: only a call is a mistake.
MODULES_NOW = frozenset({"torch.fft"})
# Calls that create a new tensor with no autograd history.
FRESH_TENSOR_FACTORIES = frozenset(
    f"torch.{name}"
    for name in (
        "tensor",
        "as_tensor",
        "from_numpy",
        "zeros",
        "ones",
        "empty",
        "full",
        "rand",
        "randn",
        "randint",
        "arange",
        "linspace",
        "logspace",
        "eye",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "rand_like",
        "randn_like",
        "FloatTensor",
        "LongTensor",
        "DoubleTensor",
        "IntTensor",
        "ByteTensor",
        "BoolTensor",
        "Tensor",
    )
)
SEEDING_CALLS = frozenset(
    {
        "torch.manual_seed",
        "torch.random.manual_seed",
        "torch.cuda.manual_seed",
        "torch.cuda.manual_seed_all",
        "torch.mps.manual_seed",
        "torch.xpu.manual_seed",
        "torch.xpu.manual_seed_all",
    }
)
# Calls with "seed" in their name that do not seed torch's generator.
NOT_SEEDING_CALLS = frozenset(
    {
        "random.seed",
        "numpy.random.seed",
        "numpy.random.default_rng",
        "numpy.random.RandomState",
        "torch.seed",
        "torch.initial_seed",
        "torch.random.seed",
        "torch.random.initial_seed",
        "torch.cuda.seed",
        "torch.cuda.seed_all",
        "torch.cuda.initial_seed",
    }
)


# The last names of every symbol a reference check looks for: a cheap filter before resolving.
_REFERENCED_NAMES = frozenset(
    qualname.rsplit(".", 1)[-1]
    for qualname in (*REMOVED, *DEPRECATED, *AMP_SYMBOLS, *PRIVATE_ALIASES, *V2_TO_TENSOR)
)


# ---- shared helpers ----------------------------------------------------------------------------
def _spell(sem: Semantics, node: ast.AST, target: str) -> str | None:
    """Source text naming `target`, through the alias `node` already uses (`F.upsample` →
    `F.interpolate`) or else through this file's own `torch` import."""
    best: tuple[int, int, str] | None = None  # (module length, is the call's own alias, name)
    dotted = sem.dotted(node)
    own = None
    if dotted is not None and isinstance(node, ast.Attribute):
        own = dotted.split(".", 1)[0]
    for name, module in sem.imports.items():
        if target.startswith(module + ".") and module.startswith("torch"):
            candidate = (len(module), int(name == own), name)
            if best is None or candidate > best:
                best = candidate
    if own is not None:
        module = sem.imports.get(own)
        if module is not None and target.startswith(module + "."):
            if best is None or len(module) >= best[0]:
                best = (len(module), 1, own)
    if best is not None:
        name = best[2]
        return name + target[len(sem.imports[name]) :]
    if target.startswith("torch."):
        root = sem.name_bound_to("torch", plain_first=True)
        if root is not None:
            return root + target[len("torch") :]
    return None


def _in_compat_branch(sem: Semantics, node: ast.AST) -> bool:
    """Code written to support several torch versions: an `except` fallback, or a branch of an
    `if` that tests the version or feature availability (`hasattr(torch.amp, "custom_fwd")`)."""
    child = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, ast.ExceptHandler):
            return True
        if isinstance(ancestor, ast.Try) and child in ancestor.body and _catches_missing(ancestor):
            return True
        if isinstance(child, ast.stmt) and _after_version_return(ancestor, child):
            return True
        child = ancestor
        if isinstance(ancestor, ast.If | ast.IfExp) and _tests_version(ancestor.test):
            return True
        if isinstance(ancestor, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return False
    return False


def _after_version_return(parent: ast.AST, statement: ast.stmt) -> bool:
    """`if hasattr(torch, "linalg"): return new(...)` followed by the old call."""
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if not isinstance(block, list) or statement not in block:
            continue
        for earlier in block[: block.index(statement)]:
            if (
                isinstance(earlier, ast.If)
                and _tests_version(earlier.test)
                and isinstance(earlier.body[-1], ast.Return | ast.Raise)
            ):
                return True
    return False


def _catches_missing(statement: ast.Try) -> bool:
    """`try: <new or old API> except (ImportError, AttributeError): <the other one>`."""
    for handler in statement.handlers:
        if handler.type is None:
            return True
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        for kind in types:
            name = kind.id if isinstance(kind, ast.Name) else getattr(kind, "attr", "")
            if name in ("ImportError", "ModuleNotFoundError", "AttributeError", "Exception"):
                return True
    return False


def _tests_version(test: ast.AST) -> bool:
    for node in ast.walk(test):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("hasattr", "getattr"):
                return True
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
        if isinstance(name, str) and ("version" in name.lower() or VERSION_FLAG.search(name)):
            return True
    return False


# flags computed once from the installed torch: `_TORCH_GREATER_EQUAL_2_4`, `TORCH_GE_2_1`
VERSION_FLAG = re.compile(r"(?i)torch\w*(\d+_\d+|greater|less|newer|older)")


def _unless_compat(
    ctx: RuleContext, code: str, node: ast.AST, message: str, fix: Fix | None = None
) -> Iterator[Finding]:
    """The finding, unless `node` sits in code that deliberately supports older torch."""
    if not _in_compat_branch(ctx.sem, node):
        yield ctx.finding(code, node, message, fix)


def _keyword(call: ast.Call, name: str) -> ast.keyword | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword
    return None


def _has_star(call: ast.Call) -> bool:
    return any(isinstance(arg, ast.Starred) for arg in call.args) or any(
        keyword.arg is None for keyword in call.keywords
    )


def _has_double_star(call: ast.Call) -> bool:
    return any(keyword.arg is None for keyword in call.keywords)


def _is_constant(node: ast.AST | None, value: object) -> bool:
    return (
        isinstance(node, ast.Constant) and type(node.value) is type(value) and node.value == value
    )


def _is_one(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value == 1


def _argument_nodes(call: ast.Call) -> list[ast.AST]:
    nodes: list[ast.AST] = [*call.args, *call.keywords]
    return sorted(nodes, key=lambda node: (node.lineno, node.col_offset))


def _keyword_name_span(ctx: RuleContext, keyword: ast.keyword) -> Span:
    span = ctx.doc.span_of(keyword)
    assert keyword.arg is not None
    return Span(span.start_line, span.start_col, span.start_line, span.start_col + len(keyword.arg))


def _replace_call(ctx: RuleContext, call: ast.Call, text: str) -> Edit:
    return ctx.replace(call, text)


def _arguments_text(ctx: RuleContext, call: ast.Call) -> str:
    return ", ".join(ctx.doc.source_of(node) for node in _argument_nodes(call))


def _applies(version: Version, since: Version | None) -> bool:
    return since is None or version >= since


def _version_text(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


@dataclass(frozen=True)
class _Reference:
    """A use of an imported name that is not a call: a decorator, a base class, an argument."""

    node: ast.Attribute
    qualname: str


def _attribute_references(sem: Semantics) -> list[_Reference]:
    """Attribute chains used as values (decorators, base classes, arguments, right-hand sides),
    found through the indexes, not by walking the tree again. Calls are handled separately."""
    cached = sem.derived.get("api.references")
    if cached is not None:
        return cached
    candidates: list[ast.AST] = []
    for function in sem.functions:
        candidates.extend(function.decorator_list)
    for cls in sem.classes:
        candidates.extend(cls.decorator_list)
        candidates.extend(cls.bases)
    for call in sem.calls:
        for arg in call.args:
            candidates.extend(arg.elts if isinstance(arg, ast.List | ast.Tuple) else (arg,))
        candidates.extend(keyword.value for keyword in call.keywords)
    for assign in sem.assigns:
        if assign.value is not None:
            candidates.append(assign.value)
    references: list[_Reference] = []
    seen: set[int] = set()
    for node in candidates:
        if type(node) is not ast.Attribute or id(node) in seen:
            continue
        seen.add(id(node))
        if node.attr not in _REFERENCED_NAMES and not _in_private_module(node):
            continue
        qualname = sem.qualname(node)
        if qualname is not None:
            references.append(_Reference(node, qualname))
    sem.derived["api.references"] = references
    return references


def _in_private_module(node: ast.Attribute) -> bool:
    value = node.value
    while isinstance(value, ast.Attribute):
        if value.attr.startswith("_"):
            return True
        value = value.value
    return False


def _import_nodes(ctx: RuleContext) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, in source order (one walk, shared by the rules that need it)."""
    sem = ctx.sem
    cached = sem.derived.get("api.imports")
    if cached is None:
        cached = [node for node in sem.parents if isinstance(node, ast.Import | ast.ImportFrom)]
        cached.sort(key=lambda node: (node.lineno, node.col_offset))
        sem.derived["api.imports"] = cached
    return cached


def _imported_qualnames(node: ast.ImportFrom) -> Iterator[tuple[ast.alias, str]]:
    if node.level or node.module is None:
        return
    for alias in node.names:
        if alias.name != "*":
            yield alias, f"{node.module}.{alias.name}"


def _imports_any(ctx: RuleContext, wanted: Iterable[str], text_hints: tuple[str, ...] = ()) -> bool:
    """Cheap test before walking for import statements: does any import bind a wanted name?"""
    wanted_set = set(wanted)
    if any(target in wanted_set for target in ctx.sem.imports.values()):
        return True
    return any(hint in ctx.doc.text for hint in text_hints)


def _rebuild_import_from(module: str, names: list[tuple[str, str | None]]) -> str:
    parts = [
        name if asname is None or asname == name else f"{name} as {asname}"
        for name, asname in names
    ]
    return f"from {module} import {', '.join(parts)}"


# ---- TD701 -------------------------------------------------------------------------------------
@rule(
    "TD701",
    "torchvision-pretrained",
    Severity.WARNING,
    "`pretrained=`/`pretrained_backbone=` on a torchvision model builder (deprecated since "
    "torchvision 0.13): use `weights=`.",
    fixable=True,
)
def torchvision_pretrained(ctx: RuleContext) -> Iterator[Finding]:
    if ctx.torch_version < TORCHVISION_MIN_TORCH:
        return
    sem = ctx.sem
    for qualname, calls in sem.calls_by_qualname.items():
        if qualname.startswith("torchvision.models."):
            key = _builder_key(qualname)
            if key is None:
                continue
            for call in calls:
                yield from _pretrained_findings(ctx, call, key, positional=True)
    for call in sem.calls_to("torch.hub.load"):
        key = _hub_builder_key(call)
        if key is not None:
            yield from _pretrained_findings(ctx, call, key, positional=False)
    if "__dict__" in ctx.doc.text or "getattr" in ctx.doc.text:
        for call in sem.calls:
            key = _builder_table_key(sem, call)
            if key is not None:
                yield from _pretrained_findings(ctx, call, key, positional=False)


def _builder_table_key(sem: Semantics, call: ast.Call) -> tuple[str, str] | None:
    """A builder looked up by name: `models.__dict__[args.arch](pretrained=True)`, the
    ImageNet-example idiom, or `getattr(torchvision.models, name)(pretrained=True)`."""
    func = call.func
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
    if module != "torchvision.models" and not (module or "").startswith("torchvision.models."):
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
    pretrained = _keyword(call, "pretrained")
    if pretrained is not None:
        arguments.append((pretrained, "pretrained", "weights", legacy[0]))
    elif (
        positional
        and call.args
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, bool)
    ):
        arguments.append((call.args[0], "pretrained", "weights", legacy[0]))
    backbone = _keyword(call, "pretrained_backbone")
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
        if _is_constant(passed, True) and value not in (None, DEPENDS, NO_WEIGHTS):
            advice = (
                f'`{new}="{value}"` loads the same weights (`"DEFAULT"` picks the newest, '
                "which can differ)"
            )
        elif _is_constant(passed, False):
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
    if _keyword(call, new) is not None or _has_double_star(call):
        return None
    if not isinstance(node, ast.keyword) and len(call.args) != 1:
        return None  # a keyword cannot stand before the remaining positional arguments
    if _is_constant(passed, False):
        replacement = f"{new}=None"
    elif _is_constant(passed, True) and value not in (None, DEPENDS, NO_WEIGHTS):
        replacement = f'{new}="{value}"'
    else:
        return None
    return Fix(f"Use `{replacement}`", (ctx.replace(node, replacement),))


# ---- TD702 -------------------------------------------------------------------------------------
@rule(
    "TD702",
    "torch-load-unsafe",
    Severity.WARNING,
    "`torch.load(..., weights_only=False)` (or, before torch 2.6, without `weights_only`) runs "
    "arbitrary code from the file.",
    fixable=True,
)
def torch_load_unsafe(ctx: RuleContext) -> Iterator[Finding]:
    version = ctx.torch_version
    for call in ctx.sem.calls_to(*TORCH_LOAD):
        # pickle_module is torch.load's third positional parameter; weights_only=True refuses it
        custom_pickle = _keyword(call, "pickle_module") is not None or len(call.args) >= 3
        yield from _unsafe_load(
            ctx,
            call,
            bare_is_unsafe=(1, 13) <= version < (2, 6),
            custom_pickle=custom_pickle,
            what="torch.load",
        )
    for call in ctx.sem.calls_to(*HUB_LOAD_STATE_DICT):
        yield from _unsafe_load(
            ctx,
            call,
            bare_is_unsafe=version >= (2, 6),
            custom_pickle=False,
            what="torch.hub.load_state_dict_from_url",
        )


def _unsafe_load(
    ctx: RuleContext, call: ast.Call, *, bare_is_unsafe: bool, custom_pickle: bool, what: str
) -> Iterator[Finding]:
    weights_only = _keyword(call, "weights_only")
    if weights_only is not None:
        if not _is_constant(weights_only.value, False):
            return
        if _reads_own_buffer(ctx.sem, call) or _fallback_after_safe_load(ctx.sem, call):
            return
        message = (
            f"`{what}(..., weights_only=False)` unpickles arbitrary objects: a crafted file runs "
            "code on load; keep `weights_only=True` unless the file is your own"
        )
        fix = Fix(
            "Use `weights_only=True` (files holding arbitrary objects will then fail to load)",
            (ctx.replace(weights_only.value, "True"),),
            safe=False,
        )
        yield ctx.finding("TD702", weights_only, message, fix)
        return
    if not bare_is_unsafe or _has_double_star(call) or _old_signature_fallback(ctx, call):
        return
    if what == "torch.load":
        message = (
            f"before torch 2.6 (target {_version_text(ctx.torch_version)}) `torch.load` defaults "
            "to `weights_only=False` and unpickles arbitrary objects; pass `weights_only=True`"
        )
    else:
        message = (
            f"`{what}` still defaults to `weights_only=False` and unpickles arbitrary objects "
            "from the download; pass `weights_only=True`"
        )
    fix = None
    if not custom_pickle:
        edit = add_keyword(ctx, call, "weights_only=True")
        if edit is not None:
            fix = Fix("Add `weights_only=True`", (edit,), safe=False)
    yield ctx.finding("TD702", call.func, message, fix)


def _reads_own_buffer(sem: Semantics, call: ast.Call) -> bool:
    """`torch.load(buffer, weights_only=False)` where `buffer` is an empty `io.BytesIO()` this
    function made and filled (a deep copy through `torch.save`): the bytes never came from a
    file anyone could have crafted. `io.BytesIO(downloaded)` is as untrusted as the download."""
    source = call.args[0] if call.args else getattr(_keyword(call, "f"), "value", None)
    if not isinstance(source, ast.Name):
        return False
    scope = sem.enclosing_function(call) or sem.tree
    bound: list[ast.AST] = []
    for statement in sem.bindings_by_scope.get(id(scope), []):
        if isinstance(statement, ast.With | ast.AsyncWith):
            bound.extend(
                item.context_expr
                for item in statement.items
                if isinstance(item.optional_vars, ast.Name) and item.optional_vars.id == source.id
            )
        elif isinstance(statement, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == source.id for target in statement.targets
        ):
            bound.append(statement.value)
    return bool(bound) and all(
        isinstance(value, ast.Call)
        and sem.call_qualname(value) == "io.BytesIO"
        and not value.args
        and not value.keywords
        for value in bound
    )


def _fallback_after_safe_load(sem: Semantics, call: ast.Call) -> bool:
    """`try: torch.load(f, weights_only=True) except UnpicklingError: torch.load(f,
    weights_only=False)`: the unsafe load is a deliberate fallback the author wrote after the
    safe one failed."""
    found = _enclosing_handler(sem, call)
    if found is None:
        return False
    attempt, _ = found
    qualname = sem.call_qualname(call)
    return any(
        isinstance(node, ast.Call)
        and sem.call_qualname(node) == qualname
        and (keyword := _keyword(node, "weights_only")) is not None
        and not _is_constant(keyword.value, False)
        for statement in attempt.body
        for node in ast.walk(statement)
    )


def _enclosing_handler(sem: Semantics, node: ast.AST) -> tuple[ast.Try, ast.ExceptHandler] | None:
    """The `try` whose `except` clause holds `node` (within the same function), if any."""
    child: ast.AST = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return None
        if isinstance(ancestor, ast.Try) and child in ancestor.handlers:
            assert isinstance(child, ast.ExceptHandler)
            return ancestor, child
        child = ancestor
    return None


def _old_signature_fallback(ctx: RuleContext, call: ast.Call) -> bool:
    """`try: load(..., weights_only=True) except TypeError: load(...)`: the bare call only runs
    on a torch whose function does not take `weights_only` yet."""
    sem = ctx.sem
    found = _enclosing_handler(sem, call)
    if found is None:
        return False
    attempt, handler = found
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    if not any(isinstance(k, ast.Name) and k.id == "TypeError" for k in kinds):
        return False
    qualname = sem.call_qualname(call)
    return any(
        isinstance(node, ast.Call)
        and sem.call_qualname(node) == qualname
        and _keyword(node, "weights_only") is not None
        for statement in attempt.body
        for node in ast.walk(statement)
    )


# ---- TD703 -------------------------------------------------------------------------------------
@rule(
    "TD703",
    "deprecated-amp",
    Severity.WARNING,
    "`torch.cuda.amp`/`torch.cpu.amp` autocast, GradScaler and custom_fwd/bwd are deprecated "
    "since torch 2.4: use `torch.amp` with a device argument.",
    fixable=True,
)
def deprecated_amp(ctx: RuleContext) -> Iterator[Finding]:
    if ctx.torch_version < AMP_DEPRECATED_IN:
        return
    sem = ctx.sem
    # Names whose uses are reported: those uses carry the fix (the device argument goes into
    # the call), so the `from torch.cuda.amp import ...` that bound them is not reported again.
    reported_names: set[str] = set()
    for qualname, (kind, device) in AMP_SYMBOLS.items():
        for call in sem.calls_by_qualname.get(qualname, []):
            fix = _amp_call_fix(ctx, call, kind, device)
            for finding in _unless_compat(
                ctx, "TD703", call.func, _amp_message(qualname, kind, device), fix
            ):
                reported_names.add(_root_name(call.func))
                yield finding
    for reference in _attribute_references(sem):
        entry = AMP_SYMBOLS.get(reference.qualname)
        if entry is None:
            continue
        kind, device = entry
        fix = None
        if kind in ("custom_fwd", "custom_bwd") and _is_decorator(sem, reference.node):
            target = _spell(sem, reference.node, f"torch.amp.{kind}")
            if target is not None:
                fix = Fix(
                    f'Use `@torch.amp.{kind}(device_type="{device}")`',
                    (ctx.replace(reference.node, f'{target}(device_type="{device}")'),),
                )
        yield from _unless_compat(
            ctx, "TD703", reference.node, _amp_message(reference.qualname, kind, device), fix
        )
    if _imports_any(ctx, AMP_SYMBOLS):
        for node in _import_nodes(ctx):
            if not isinstance(node, ast.ImportFrom):
                continue
            for alias, qualname in _imported_qualnames(node):
                entry = AMP_SYMBOLS.get(qualname)
                bound = alias.asname or alias.name
                if entry is None or (
                    bound in reported_names and sem.imports.get(bound) == qualname
                ):
                    continue
                yield from _unless_compat(ctx, "TD703", alias, _amp_message(qualname, *entry))


def _root_name(node: ast.AST) -> str:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def _amp_message(qualname: str, kind: str, device: str) -> str:
    short = qualname.replace(".autocast_mode", "").replace(".grad_scaler", "")
    if kind in ("custom_fwd", "custom_bwd"):
        new = f'torch.amp.{kind}(device_type="{device}")'
    else:
        new = f'torch.amp.{kind}("{device}")'
    return f"`{short}` is deprecated since torch 2.4 (FutureWarning on use): use `{new}`"


def _is_decorator(sem: Semantics, node: ast.AST) -> bool:
    parent = sem.parent(node)
    return isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and (
        node in parent.decorator_list
    )


def _amp_call_fix(ctx: RuleContext, call: ast.Call, kind: str, device: str) -> Fix | None:
    sem = ctx.sem
    target = _spell(sem, call.func, f"torch.amp.{kind}")
    if target is None or _has_star(call):
        return None
    keywords = ", ".join(ctx.doc.source_of(keyword) for keyword in call.keywords)
    if kind in ("custom_fwd", "custom_bwd"):
        # used as `@torch.cuda.amp.custom_fwd(cast_inputs=...)`; a positional is the function
        if call.args:
            return None
        arguments = f'device_type="{device}"' + (f", {keywords}" if keywords else "")
    else:
        if call.args:
            return None  # positional order differs: (enabled, dtype, ...) vs (device, dtype, ...)
        arguments = f'"{device}"' + (f", {keywords}" if keywords else "")
    if "\n" in arguments or "#" in arguments:
        return None
    text = f"{target}({arguments})"
    return Fix(f"Use `{text}`", (_replace_call(ctx, call, text),))


# ---- TD704 -------------------------------------------------------------------------------------
@rule(
    "TD704",
    "variable-wrapper",
    Severity.WARNING,
    "`torch.autograd.Variable(x)` (a leftover from torch 0.3): it returns `x` detached, and "
    "`volatile=True` has no effect.",
    fixable=True,
    # Off by default: on the ecosystem corpus every `Variable(x)` wraps data with no autograd
    # history, where the wrapper changes nothing; reported under `--select TD704` / ALL.
    enabled_by_default=False,
)
def variable_wrapper(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.sem.calls_to(*VARIABLE):
        if len(call.args) != 1 or _has_star(call):
            yield ctx.finding("TD704", call.func, _variable_message(call), None)
            continue
        yield ctx.finding("TD704", call.func, _variable_message(call), _variable_fix(ctx, call))


def _variable_message(call: ast.Call) -> str:
    if _keyword(call, "volatile") is not None:
        return (
            '`volatile=` was removed in torch 0.4 and has no effect (torch warns "volatile was '
            'removed and now has no effect"): gradients are still recorded; use '
            "`with torch.no_grad():` around the inference code"
        )
    return (
        "`Variable(x)` is a torch 0.3 leftover: since 0.4 it only returns `x` detached from its "
        "graph (requires_grad=False unless `requires_grad=True` is passed); on data with no "
        "autograd history that changes nothing"
    )


def _variable_fix(ctx: RuleContext, call: ast.Call) -> Fix | None:
    sem = ctx.sem
    value = call.args[0]
    source = ctx.doc.source_of(value)
    requires_grad = _keyword(call, "requires_grad")
    others = [k for k in call.keywords if k.arg not in ("requires_grad", "volatile")]
    if others:
        return None
    fresh = isinstance(value, ast.Call) and sem.call_qualname(value) in FRESH_TENSOR_FACTORIES
    wrapped = f"({source})" if _needs_parentheses(value) else source
    if requires_grad is not None:
        if _is_constant(requires_grad.value, True):
            text = (
                f"{wrapped}.requires_grad_()" if fresh else f"{wrapped}.detach().requires_grad_()"
            )
            return Fix(f"Use `{text}`", (_replace_call(ctx, call, text),))
        if not _is_constant(requires_grad.value, False):
            return None
    if fresh:
        return Fix(f"Use `{source}`", (_replace_call(ctx, call, source),))
    # `Variable(x)` is `x.detach()`: dropping the wrapper changes behaviour only when `x` has
    # autograd history, which the old code cut on purpose (or by accident).
    statement = sem.enclosing_statement(call)
    if (
        isinstance(statement, ast.Assign)
        and statement.value is call
        and len(statement.targets) == 1
        and ctx.doc.source_of(statement.targets[0]) == source
        and ctx.statement_owns_lines(statement)
    ):
        return Fix(
            f"Remove `{ctx.doc.source_of(statement)}` (a no-op unless `{source}` has a graph)",
            (ctx.delete_lines_of(statement),),
            safe=False,
        )
    return Fix(
        f"Use `{source}` (drops the implicit detach)",
        (_replace_call(ctx, call, wrapped if _needs_parentheses(value) else source),),
        safe=False,
    )


def _needs_parentheses(node: ast.AST) -> bool:
    return not isinstance(
        node,
        ast.Name | ast.Attribute | ast.Call | ast.Subscript | ast.Constant | ast.List | ast.Tuple,
    )


# ---- TD705 -------------------------------------------------------------------------------------
@rule(
    "TD705",
    "compile-bad-kwarg",
    Severity.ERROR,
    "`torch.compile` with a keyword it does not take (e.g. `dynamic_shapes=`) or an unknown "
    "`mode=`: it raises.",
    fixable=True,
)
def compile_bad_kwarg(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.sem.calls_to("torch.compile"):
        passed = {keyword.arg for keyword in call.keywords if keyword.arg is not None}
        for keyword in call.keywords:
            if keyword.arg is None or keyword.arg in COMPILE_KEYWORDS:
                continue
            suggestion = COMPILE_KEYWORD_FIXES.get(keyword.arg) or _close_match(
                keyword.arg, sorted(COMPILE_KEYWORDS)
            )
            message = (
                f'`torch.compile()` has no keyword `{keyword.arg}`: it raises "TypeError: '
                f"compile() got an unexpected keyword argument '{keyword.arg}'\""
            )
            fix = None
            if suggestion is not None:
                message += f"; did you mean `{suggestion}=`?"
                if suggestion not in passed:
                    fix = Fix(
                        f"Rename to `{suggestion}=`",
                        (Edit(_keyword_name_span(ctx, keyword), suggestion),),
                    )
            yield ctx.finding("TD705", keyword, message, fix)
        mode = _keyword(call, "mode")
        if mode is not None and isinstance(mode.value, ast.Constant):
            value = mode.value.value
            if isinstance(value, str) and value not in COMPILE_MODES:
                yield _bad_mode(ctx, mode.value, value)
        options = _keyword(call, "options")
        if (
            mode is not None
            and options is not None
            and not _is_constant(mode.value, None)
            and not _is_constant(options.value, None)
        ):
            message = (
                "`torch.compile()` takes `mode=` or `options=`, not both: it raises "
                "\"RuntimeError: Either mode or options can be specified, but both can't be "
                'specified at the same time."'
            )
            yield ctx.finding("TD705", options, message, None)


def _bad_mode(ctx: RuleContext, node: ast.Constant, value: str) -> Finding:
    normalised = value.strip().lower().replace("_", "-").replace(" ", "-")
    suggestion = (
        normalised if normalised in COMPILE_MODES else _close_match(normalised, list(COMPILE_MODES))
    )
    modes = ", ".join(COMPILE_MODES)
    message = (
        f'`mode="{value}"` is not a torch.compile mode: it raises "RuntimeError: '
        f'Unrecognized mode={value}, should be one of: {modes}"'
    )
    fix = None
    if suggestion is not None:
        message += f'; did you mean "{suggestion}"?'
        quote = ctx.doc.source_of(node)[:1]
        quote = quote if quote in ("'", '"') else '"'
        fix = Fix(f'Use mode="{suggestion}"', (ctx.replace(node, f"{quote}{suggestion}{quote}"),))
    return ctx.finding("TD705", node, message, fix)


def _close_match(word: str, candidates: list[str]) -> str | None:
    matches = difflib.get_close_matches(word, candidates, n=2, cutoff=0.8)
    return matches[0] if len(matches) == 1 else None


# ---- TD706 -------------------------------------------------------------------------------------
@rule(
    "TD706",
    "trainer-renamed-args",
    Severity.ERROR,
    "`TrainingArguments(evaluation_strategy=...)` and other renamed keywords: current "
    "transformers raises TypeError.",
    fixable=True,
)
def trainer_renamed_args(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.sem.calls_to(*sorted(TRAINING_ARGUMENT_CLASSES)):
        passed = {keyword.arg for keyword in call.keywords}
        name = (ctx.sem.call_qualname(call) or "TrainingArguments").rsplit(".", 1)[-1]
        for keyword in call.keywords:
            if keyword.arg not in TRAINING_ARGUMENT_RENAMES:
                continue
            new, since = TRAINING_ARGUMENT_RENAMES[keyword.arg]
            message = (
                f"`{keyword.arg}=` was renamed `{new}=`; since transformers {since} "
                f'`{name}(...)` raises "TypeError: ... got an unexpected keyword argument '
                f"'{keyword.arg}'\""
            )
            fix = None
            if new not in passed:
                fix = Fix(f"Rename to `{new}=`", (Edit(_keyword_name_span(ctx, keyword), new),))
            yield ctx.finding("TD706", keyword, message, fix)


# ---- TD707 / TD708 -----------------------------------------------------------------------------
@rule(
    "TD707",
    "removed-function",
    Severity.ERROR,
    "A call or import of a function torch removed (`torch.solve`, `torch.symeig`, ...): it raises.",
    fixable=True,
)
def removed_function(ctx: RuleContext) -> Iterator[Finding]:
    yield from _api_symbol_findings(ctx, "TD707")


@rule(
    "TD708",
    "deprecated-function",
    Severity.WARNING,
    "A call or import of a deprecated torch function (`torch.qr`, `torch.norm`, `functorch.*`, "
    "...).",
    fixable=True,
)
def deprecated_function(ctx: RuleContext) -> Iterator[Finding]:
    yield from _api_symbol_findings(ctx, "TD708")


def _code_for(symbol: ApiSymbol, version: Version) -> str | None:
    if symbol.removed_in is not None and version >= symbol.removed_in:
        return "TD707"
    if _applies(version, symbol.deprecated_in):
        return "TD708"
    return None


def _symbol_message(symbol: ApiSymbol, code: str, imported: bool = False) -> str:
    name = symbol.qualname
    if code == "TD707":
        when = f" by torch {_version_text(symbol.removed_in)}" if symbol.removed_in else ""
        how = "importing it fails" if imported else "calling it raises"
        return f"`{name}` was removed{when} ({how}): use {symbol.replacement}"
    since = f" since torch {_version_text(symbol.deprecated_in)}" if symbol.deprecated_in else ""
    if symbol.evidence == "docs":
        state = f"deprecated{since} (its documentation says so; it does not warn)"
    elif symbol.evidence == "raises":
        state = f"deprecated{since} and removed in later torch releases"
    else:
        state = f"deprecated{since} (torch warns when it runs)"
    return f"`{name}` is {state}: use {symbol.replacement}"


def _api_symbol_findings(ctx: RuleContext, code: str) -> Iterator[Finding]:
    sem = ctx.sem
    version = ctx.torch_version
    tables = (REMOVED, DEPRECATED)
    for table in tables:
        for qualname, symbol in table.items():
            calls = sem.calls_by_qualname.get(qualname)
            if not calls or _code_for(symbol, version) != code:
                continue
            for call in calls:
                fix = _symbol_call_fix(ctx, call, symbol)
                if fix is None and _reached_through_reported_import(sem, call.func, code, version):
                    continue
                yield from _unless_compat(ctx, code, call.func, _symbol_message(symbol, code), fix)
    for reference in _attribute_references(sem):
        if reference.qualname in MODULES_NOW:
            continue
        symbol = REMOVED.get(reference.qualname) or DEPRECATED.get(reference.qualname)
        if symbol is None or _code_for(symbol, version) != code:
            continue
        fix = None
        if symbol.rename is not None:
            target = _spell(sem, reference.node, symbol.rename)
            if target is not None:
                fix = Fix(
                    f"Use `{target}`",
                    (ctx.replace(reference.node, target),),
                    safe=symbol.rename_is_safe,
                )
        if fix is None and _reached_through_reported_import(sem, reference.node, code, version):
            continue
        yield from _unless_compat(ctx, code, reference.node, _symbol_message(symbol, code), fix)
    wanted = [*REMOVED, *DEPRECATED]
    if not _imports_any(ctx, wanted, text_hints=tuple(REMOVED_MODULES)):
        return
    for node in _import_nodes(ctx):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _removed_module_finding(ctx, code, alias, alias.name)
        elif node.module is not None and not node.level:
            if _is_removed_module(node.module):
                yield from _removed_module_finding(ctx, code, node, node.module)
            else:
                yield from _symbol_import_findings(ctx, code, node)


def _reached_through_reported_import(
    sem: Semantics, node: ast.AST, code: str, version: Version
) -> bool:
    """`weight_norm(...)` after `from torch.nn.utils import weight_norm`: the import is
    reported (with the fix, when the module swap is mechanical), and a use with no fix of its
    own would only repeat it."""
    root = node
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name):
        return False
    target = sem.imports.get(root.id)
    if target is None or target == root.id or target in MODULES_NOW:
        return False
    symbol = REMOVED.get(target) or DEPRECATED.get(target)
    return symbol is not None and _code_for(symbol, version) == code


def _is_removed_module(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in REMOVED_MODULES)


def _removed_module_finding(
    ctx: RuleContext, code: str, node: ast.AST, module: str
) -> Iterator[Finding]:
    for removed, (since, replacement) in REMOVED_MODULES.items():
        if module == removed or module.startswith(removed + "."):
            if ctx.torch_version >= since and code == "TD707":
                message = (
                    f"`{removed}` was removed in torch {_version_text(since)} (the import raises "
                    f"ModuleNotFoundError): use {replacement}"
                )
                yield from _unless_compat(ctx, "TD707", node, message)
            return


def _symbol_import_findings(ctx: RuleContext, code: str, node: ast.ImportFrom) -> Iterator[Finding]:
    version = ctx.torch_version
    entries = list(_imported_qualnames(node))
    flagged = []
    for alias, qualname in entries:
        if qualname in MODULES_NOW:
            continue
        symbol = REMOVED.get(qualname) or DEPRECATED.get(qualname)
        if symbol is not None and _code_for(symbol, version) == code:
            flagged.append((alias, symbol))
    if not flagged:
        return
    fix = _import_module_swap(ctx, node, entries)
    for alias, symbol in flagged:
        yield from _unless_compat(
            ctx, code, alias, _symbol_message(symbol, code, imported=True), fix
        )
        fix = None  # one statement, one fix


def _import_module_swap(
    ctx: RuleContext, node: ast.ImportFrom, entries: list[tuple[ast.alias, str]]
) -> Fix | None:
    """`from functorch import vmap, grad` → `from torch.func import vmap, grad`: only when every
    imported name has a drop-in twin of the same name in one other module."""
    modules = set()
    safe = True
    for alias, qualname in entries:
        symbol = REMOVED.get(qualname) or DEPRECATED.get(qualname)
        if symbol is None or symbol.rename is None:
            return None
        module, _, name = symbol.rename.rpartition(".")
        if name != alias.name:
            return None
        modules.add(module)
        safe = safe and symbol.rename_is_safe
    if len(modules) != 1 or not ctx.is_single_line_statement(node):
        return None
    text = _rebuild_import_from(modules.pop(), [(a.name, a.asname) for a, _ in entries])
    return Fix(f"Use `{text}`", (ctx.replace(node, text),), safe=safe)


def _symbol_call_fix(ctx: RuleContext, call: ast.Call, symbol: ApiSymbol) -> Fix | None:
    special = SPECIAL_CALL_FIXES.get(symbol.qualname)
    if special is not None:
        return special(ctx, call)
    if symbol.rename is None:
        return None
    target = _spell(ctx.sem, call.func, symbol.rename)
    if target is None or not isinstance(call.func, ast.Attribute):
        return None
    return Fix(f"Use `{target}`", (ctx.replace(call.func, target),), safe=symbol.rename_is_safe)


def _linalg(ctx: RuleContext, call: ast.Call, name: str) -> str | None:
    if not isinstance(call.func, ast.Attribute):
        return None
    return _spell(ctx.sem, call.func, f"torch.linalg.{name}")


def _fix_solve(ctx: RuleContext, call: ast.Call) -> Fix | None:
    """`torch.solve(B, A).solution` / `torch.solve(B, A)[0]` → `torch.linalg.solve(A, B)`."""
    if len(call.args) != 2 or call.keywords or _has_star(call):
        return None
    parent = ctx.sem.parent(call)
    if isinstance(parent, ast.Attribute) and parent.attr == "solution":
        whole: ast.AST = parent
    elif isinstance(parent, ast.Subscript) and _is_constant(parent.slice, 0):
        whole = parent
    else:
        return None
    target = _linalg(ctx, call, "solve")
    if target is None:
        return None
    b, a = (ctx.doc.source_of(arg) for arg in call.args)
    text = f"{target}({a}, {b})"
    return Fix(f"Use `{text}`", (ctx.replace(whole, text),))


def _fix_rename_simple(name: str, *, max_positional: int, keywords: tuple[str, ...] = ()):
    def fix(ctx: RuleContext, call: ast.Call) -> Fix | None:
        if len(call.args) > max_positional or _has_star(call):
            return None
        if any(keyword.arg not in keywords for keyword in call.keywords):
            return None
        target = _linalg(ctx, call, name)
        if target is None:
            return None
        return Fix(f"Use `{target}`", (ctx.replace(call.func, target),))

    return fix


def _fix_qr(ctx: RuleContext, call: ast.Call) -> Fix | None:
    if _has_star(call) or len(call.args) != 1:
        return None
    some = _keyword(call, "some")
    if [k for k in call.keywords if k.arg != "some"]:
        return None
    target = _linalg(ctx, call, "qr")
    if target is None:
        return None
    edits = [ctx.replace(call.func, target)]
    if some is not None:
        if _is_constant(some.value, False):
            edits.append(ctx.replace(some, 'mode="complete"'))
        elif _is_constant(some.value, True):
            edits.append(ctx.replace(some, 'mode="reduced"'))
        else:
            return None
    return Fix(f"Use `{target}`", tuple(edits))


def _fix_chain_matmul(ctx: RuleContext, call: ast.Call) -> Fix | None:
    if len(call.args) < 2 or call.keywords or _has_star(call):
        return None
    target = _linalg(ctx, call, "multi_dot")
    if target is None:
        return None
    text = f"{target}([{_arguments_text(ctx, call)}])"
    if "\n" in text:
        return None
    return Fix(f"Use `{target}([...])`", (_replace_call(ctx, call, text),))


def _fix_cholesky(ctx: RuleContext, call: ast.Call) -> Fix | None:
    if len(call.args) != 1 or _has_star(call):
        return None
    upper = _keyword(call, "upper")
    if [k for k in call.keywords if k.arg != "upper"]:
        return None
    target = _linalg(ctx, call, "cholesky")
    if target is None:
        return None
    source = ctx.doc.source_of(call.args[0])
    if upper is None or _is_constant(upper.value, False):
        text = f"{target}({source})"
    elif _is_constant(upper.value, True):
        text = f"{target}({source}).mH"
    else:
        return None
    return Fix(f"Use `{text}`", (_replace_call(ctx, call, text),))


def _fix_lu_solve(ctx: RuleContext, call: ast.Call) -> Fix | None:
    if len(call.args) != 3 or call.keywords or _has_star(call):
        return None
    target = _linalg(ctx, call, "lu_solve")
    if target is None:
        return None
    b, lu, pivots = (ctx.doc.source_of(arg) for arg in call.args)
    text = f"{target}({lu}, {pivots}, {b})"
    return Fix(f"Use `{text}`", (_replace_call(ctx, call, text),))


def _fix_norm(ctx: RuleContext, call: ast.Call) -> Fix | None:
    """`torch.norm(x)` is the 2-norm of all elements: `torch.linalg.vector_norm(x)`."""
    if len(call.args) != 1 or call.keywords or _has_star(call):
        return None
    target = _linalg(ctx, call, "vector_norm")
    if target is None:
        return None
    return Fix(f"Use `{target}`", (ctx.replace(call.func, target),))


def _fix_range(ctx: RuleContext, call: ast.Call) -> Fix | None:
    """`torch.range(a, b)` → `torch.arange(a, b + 1, ...)`: integer literals and step 1 only,
    where the two agree exactly; torch.range's default dtype is float32, arange's int64."""
    if _has_star(call) or not isinstance(call.func, ast.Attribute):
        return None
    if len(call.args) == 3 and _is_one(call.args[2]):
        args = call.args[:2]
    elif len(call.args) == 2:
        args = call.args
    else:
        return None
    start, end = args
    if not all(isinstance(a, ast.Constant) and type(a.value) is int for a in (start, end)):
        return None
    if [k for k in call.keywords if k.arg not in ("dtype", "device", "requires_grad")]:
        return None
    target = _spell(ctx.sem, call.func, "torch.arange")
    root = _spell(ctx.sem, call.func, "torch.float32")
    if target is None or root is None:
        return None
    assert isinstance(end, ast.Constant)
    parts = [ctx.doc.source_of(start), str(end.value + 1)]
    safe = _keyword(call, "dtype") is not None
    if not safe:
        parts.append(f"dtype={root}")
    parts.extend(ctx.doc.source_of(keyword) for keyword in call.keywords)
    text = f"{target}({', '.join(parts)})"
    # torch.range follows torch.get_default_dtype(): float32 unless the program changed it
    return Fix(f"Use `{text}`", (_replace_call(ctx, call, text),), safe=safe)


def _fix_upsampling_module(mode_arguments: str):
    def fix(ctx: RuleContext, call: ast.Call) -> Fix | None:
        if _has_star(call) or len(call.args) > 2 or not isinstance(call.func, ast.Attribute):
            return None
        if [k for k in call.keywords if k.arg not in ("size", "scale_factor")]:
            return None
        target = _spell(ctx.sem, call.func, "torch.nn.Upsample")
        if target is None:
            return None
        arguments = [_arguments_text(ctx, call)] if _argument_nodes(call) else []
        text = f"{target}({', '.join([*arguments, mode_arguments])})"
        if "\n" in text:
            return None
        return Fix(f"Use `{text}`", (_replace_call(ctx, call, text),))

    return fix


def _fix_upsample_function(mode_arguments: str):
    def fix(ctx: RuleContext, call: ast.Call) -> Fix | None:
        if _has_star(call) or len(call.args) > 3 or not isinstance(call.func, ast.Attribute):
            return None
        if [k for k in call.keywords if k.arg not in ("input", "size", "scale_factor")]:
            return None
        target = _spell(ctx.sem, call.func, "torch.nn.functional.interpolate")
        if target is None:
            return None
        edits = [ctx.replace(call.func, target)]
        edit = add_keyword(ctx, call, mode_arguments)
        if edit is None:
            return None
        edits.append(edit)
        return Fix(f"Use `{target}(..., {mode_arguments})`", tuple(edits))

    return fix


def _fix_default_tensor_type(ctx: RuleContext, call: ast.Call) -> Fix | None:
    if len(call.args) != 1 or call.keywords or not isinstance(call.func, ast.Attribute):
        return None
    dtype = {"torch.FloatTensor": "float32", "torch.DoubleTensor": "float64"}.get(
        ctx.sem.qualname(call.args[0]) or ""
    )
    if dtype is None:
        return None
    setter = _spell(ctx.sem, call.func, "torch.set_default_dtype")
    value = _spell(ctx.sem, call.func, f"torch.{dtype}")
    if setter is None or value is None:
        return None
    text = f"{setter}({value})"
    return Fix(f"Use `{text}`", (_replace_call(ctx, call, text),))


def _fix_register_pytree_node(ctx: RuleContext, call: ast.Call) -> Fix | None:
    if len(call.args) > 3 or call.keywords or _has_star(call):
        return None
    if not isinstance(call.func, ast.Attribute):
        return None
    target = _spell(ctx.sem, call.func, "torch.utils._pytree.register_pytree_node")
    if target is None:
        return None
    return Fix(f"Use `{target}`", (ctx.replace(call.func, target),))


SPECIAL_CALL_FIXES = {
    "torch.solve": _fix_solve,
    "torch.matrix_rank": _fix_rename_simple("matrix_rank", max_positional=1),
    "torch.qr": _fix_qr,
    "torch.chain_matmul": _fix_chain_matmul,
    "torch.cholesky": _fix_cholesky,
    "torch.lu": _fix_rename_simple("lu_factor", max_positional=1, keywords=("pivot",)),
    "torch.lu_solve": _fix_lu_solve,
    "torch.norm": _fix_norm,
    "torch.range": _fix_range,
    "torch.set_default_tensor_type": _fix_default_tensor_type,
    "torch.nn.UpsamplingNearest2d": _fix_upsampling_module('mode="nearest"'),
    "torch.nn.UpsamplingBilinear2d": _fix_upsampling_module('mode="bilinear", align_corners=True'),
    "torch.nn.functional.upsample_nearest": _fix_upsample_function('mode="nearest"'),
    "torch.nn.functional.upsample_bilinear": _fix_upsample_function(
        'mode="bilinear", align_corners=True'
    ),
    "torch.utils._pytree._register_pytree_node": _fix_register_pytree_node,
}


# ---- TD709 -------------------------------------------------------------------------------------
@rule(
    "TD709",
    "checkpoint-use-reentrant",
    Severity.WARNING,
    "`torch.utils.checkpoint.checkpoint(...)` without an explicit `use_reentrant` (torch warns "
    "on every call since 2.1).",
    fixable=True,
)
def checkpoint_use_reentrant(ctx: RuleContext) -> Iterator[Finding]:
    if ctx.torch_version < (2, 1):
        return
    for call in ctx.sem.calls_to(*CHECKPOINT):
        if _keyword(call, "use_reentrant") is not None or _has_double_star(call):
            continue
        name = (ctx.sem.call_qualname(call) or "checkpoint").rsplit(".", 1)[-1]
        message = (
            f'`{name}()` without `use_reentrant=`: torch warns on every call ("the '
            'use_reentrant parameter should be passed explicitly") and the implicit default '
            "is the reentrant variant, which ignores inputs that do not require grad; pass "
            "`use_reentrant=False` (recommended) or `True`"
        )
        fix = None
        edit = add_keyword(ctx, call, "use_reentrant=False")
        if edit is not None:
            fix = Fix(
                "Add `use_reentrant=False` (the non-reentrant variant: changes behaviour)",
                (edit,),
                safe=False,
            )
        yield ctx.finding("TD709", call.func, message, fix)


# ---- TD710 -------------------------------------------------------------------------------------
@rule(
    "TD710",
    "numerically-unstable",
    Severity.WARNING,
    "`torch.log(1 + x)`, `torch.exp(x) - 1`, `torch.log(torch.sum(torch.exp(x)))`: use "
    "`log1p`, `expm1`, `logsumexp`.",
    fixable=True,
    # Off by default: whether `log(1 + x)` loses anything depends on how small x gets, which
    # the text does not say; on the ecosystem corpus 2 of its 3 findings changed no number.
    enabled_by_default=False,
)
def numerically_unstable(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for call in sem.calls_to("torch.log"):
        if len(call.args) != 1 or call.keywords:
            continue
        argument = call.args[0]
        if isinstance(argument, ast.BinOp) and isinstance(argument.op, ast.Add):
            yield from _log_one_plus(ctx, call, argument)
        elif isinstance(argument, ast.Call):
            yield from _log_sum_exp(ctx, call, argument)
    for call in sem.calls_to("torch.exp"):
        parent = sem.parent(call)
        if (
            isinstance(parent, ast.BinOp)
            and isinstance(parent.op, ast.Sub)
            and parent.left is call
            and _is_one(parent.right)
        ):
            fix = None
            if len(call.args) == 1 and not call.keywords and not _has_star(call):
                target = _spell(sem, call.func, "torch.expm1")
                if target is not None:
                    text = f"{target}({ctx.doc.source_of(call.args[0])})"
                    fix = Fix(f"Use `{text}`", (ctx.replace(parent, text),))
            message = (
                "`torch.exp(x) - 1` loses all precision for small x (float32: exp(1e-8) - 1 is "
                "0): use `torch.expm1(x)`"
            )
            yield ctx.finding("TD710", parent, message, fix)


def _log_one_plus(ctx: RuleContext, call: ast.Call, argument: ast.BinOp) -> Iterator[Finding]:
    if _is_one(argument.left):
        x = argument.right
    elif _is_one(argument.right):
        x = argument.left
    else:
        return
    sem = ctx.sem
    inner = x if isinstance(x, ast.Call) and sem.call_qualname(x) == "torch.exp" else None
    if inner is not None and len(inner.args) == 1 and not inner.keywords:
        message = (
            "`torch.log(1 + torch.exp(x))` overflows to inf once x exceeds 88 (float32) and "
            "loses precision where exp(x) is tiny: use `torch.nn.functional.softplus(x)`"
        )
        target = _spell(sem, call.func, "torch.nn.functional.softplus")
        fix = None
        if target is not None and not _has_star(inner):
            text = f"{target}({ctx.doc.source_of(inner.args[0])})"
            fix = Fix(f"Use `{text}`", (ctx.replace(call, text),), safe=False)
        yield ctx.finding("TD710", call, message, fix)
        return
    message = (
        "`torch.log(1 + x)` loses all precision for small x (float32: log(1 + 1e-8) is 0): use "
        "`torch.log1p(x)`"
    )
    target = _spell(sem, call.func, "torch.log1p")
    fix = None
    if target is not None:
        text = f"{target}({ctx.doc.source_of(x)})"
        fix = Fix(f"Use `{text}`", (ctx.replace(call, text),))
    yield ctx.finding("TD710", call, message, fix)


def _log_sum_exp(ctx: RuleContext, call: ast.Call, inner: ast.Call) -> Iterator[Finding]:
    sem = ctx.sem
    if sem.call_qualname(inner) == "torch.sum":
        if not inner.args:
            return
        exp, rest = inner.args[0], inner.args[1:]
    elif isinstance(inner.func, ast.Attribute) and inner.func.attr == "sum":
        exp, rest = inner.func.value, list(inner.args)
    else:
        return
    if not (isinstance(exp, ast.Call) and sem.call_qualname(exp) == "torch.exp"):
        return
    if len(exp.args) != 1 or exp.keywords or _has_star(exp) or _has_star(inner):
        return
    if _is_max_shifted(sem, exp.args[0], call):
        return  # `m + log(sum(exp(x - m)))`: the stable log-sum-exp written out by hand
    dim = rest[0] if rest else (k.value if (k := _keyword(inner, "dim")) else None)
    keepdim = rest[1] if len(rest) > 1 else (k.value if (k := _keyword(inner, "keepdim")) else None)
    message = (
        "`torch.log(torch.sum(torch.exp(x)))` overflows to inf once an element of x exceeds 88 "
        "(float32) and underflows to -inf for very negative x: use `torch.logsumexp(x, dim)`"
    )
    fix = None
    others = [k for k in inner.keywords if k.arg not in ("dim", "keepdim")]
    if dim is not None and not _is_constant(dim, None) and len(rest) <= 2 and not others:
        target = _spell(sem, call.func, "torch.logsumexp")
        if target is not None:
            parts = [ctx.doc.source_of(exp.args[0]), ctx.doc.source_of(dim)]
            if keepdim is not None:
                parts.append(f"keepdim={ctx.doc.source_of(keepdim)}")
            text = f"{target}({', '.join(parts)})"
            fix = Fix(f"Use `{text}`", (ctx.replace(call, text),))
    elif dim is None or _is_constant(dim, None):
        message += " (logsumexp needs `dim`: all dimensions are `dim=tuple(range(x.dim()))`)"
    yield ctx.finding("TD710", call, message, fix)


def _is_max_shifted(sem: Semantics, value: ast.AST, at: ast.AST) -> bool:
    """`exp(x - m)`, or `exp(shifted)` where `shifted = x - m` in the same function."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Sub):
        return True
    if not isinstance(value, ast.Name):
        return False
    scope = sem.enclosing_function(at)
    for assign in sem.assigns:
        if not isinstance(assign, ast.Assign) or (assign.lineno, assign.col_offset) > (
            at.lineno,
            at.col_offset,
        ):
            continue
        if any(isinstance(t, ast.Name) and t.id == value.id for t in assign.targets):
            if sem.enclosing_function(assign) is scope and isinstance(assign.value, ast.BinOp):
                if isinstance(assign.value.op, ast.Sub):
                    return True
    return False


# ---- TD711 -------------------------------------------------------------------------------------
@rule(
    "TD711",
    "transforms-v2-totensor",
    Severity.WARNING,
    "`torchvision.transforms.v2.ToTensor` is deprecated: use `v2.ToImage()` + "
    "`v2.ToDtype(torch.float32, scale=True)`.",
    fixable=True,
)
def transforms_v2_to_tensor(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    message = (
        "`v2.ToTensor` is deprecated (torchvision warns when it is created): use "
        "`v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])`, which gives the "
        "same values"
    )
    for call in sem.calls_to(*V2_TO_TENSOR):
        yield from _unless_compat(ctx, "TD711", call.func, message, _to_tensor_fix(ctx, call))
    for reference in _attribute_references(sem):
        if reference.qualname in V2_TO_TENSOR:
            yield from _unless_compat(ctx, "TD711", reference.node, message)
    if _imports_any(ctx, V2_TO_TENSOR):
        for node in _import_nodes(ctx):
            if isinstance(node, ast.ImportFrom):
                for alias, qualname in _imported_qualnames(node):
                    if qualname in V2_TO_TENSOR:
                        yield from _unless_compat(ctx, "TD711", alias, message)


def _to_tensor_fix(ctx: RuleContext, call: ast.Call) -> Fix | None:
    if call.args or call.keywords or not isinstance(call.func, ast.Attribute):
        return None
    torch_root = ctx.sem.name_bound_to("torch", plain_first=True)
    if torch_root is None:
        return None
    prefix = ctx.doc.source_of(call.func.value)
    pair = f"{prefix}.ToImage(), {prefix}.ToDtype({torch_root}.float32, scale=True)"
    parent = ctx.sem.parent(call)
    grandparent = ctx.sem.parent(parent) if parent is not None else None
    if (
        isinstance(parent, ast.List)
        and isinstance(grandparent, ast.Call)
        and ctx.sem.call_qualname(grandparent) in V2_COMPOSE
    ):
        return Fix(
            "Replace with `ToImage(), ToDtype(torch.float32, scale=True)`",
            (ctx.replace(call, pair),),
        )
    text = f"{prefix}.Compose([{pair}])"
    return Fix(f"Use `{text}`", (ctx.replace(call, text),))


# ---- TD712 -------------------------------------------------------------------------------------
@rule(
    "TD712",
    "private-api",
    Severity.WARNING,
    "A non-public torch name that has a public twin (`torch.utils.data._utils.collate."
    "default_collate`, `_LRScheduler`, ...).",
    fixable=True,
)
def private_api(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    version = ctx.torch_version
    # Once per private name and file: at the import that binds it (the import's fix makes every
    # use public), else at the first use, with one fix for all of them.
    uses: dict[str, list[ast.AST]] = {}
    for qualname, calls in sem.calls_by_qualname.items():
        if _public_twin(qualname, version) is not None:
            uses.setdefault(qualname, []).extend(call.func for call in calls)
    for reference in _attribute_references(sem):
        if _public_twin(reference.qualname, version) is not None:
            uses.setdefault(reference.qualname, []).append(reference.node)
    for qualname, nodes in uses.items():
        public = _public_twin(qualname, version)
        assert public is not None
        shown = [
            node
            for node in nodes
            if not _reached_through_private_import(sem, node, version)
            and not _in_compat_branch(sem, node)
        ]
        if shown:
            yield _first_private_use(ctx, qualname, public, shown)
    if not _imports_any(ctx, PRIVATE_ALIASES, text_hints=tuple(PRIVATE_MODULES)) and not any(
        _public_twin(target, version) is not None for target in sem.imports.values()
    ):
        return
    for node in _import_nodes(ctx):
        yield from _private_import_findings(ctx, node)


def _first_private_use(
    ctx: RuleContext, qualname: str, public: str, nodes: list[ast.AST]
) -> Finding:
    nodes = sorted(set(nodes), key=lambda node: (node.lineno, node.col_offset))
    message = _private_message(qualname, public)
    if len(nodes) > 1:
        message += f" ({len(nodes)} uses in this file; the fix changes all of them)"
    edits: list[Edit] = []
    for node in nodes:
        one = _private_reference_fix(ctx, node, public)
        if one is None:
            edits = []
            break
        edits.extend(one.edits)
    fix = Fix(f"Use the public `{public}`", tuple(edits)) if edits else None
    return ctx.finding("TD712", nodes[0], message, fix)


def _reached_through_private_import(sem: Semantics, node: ast.AST, version: Version) -> bool:
    """`default_collate(...)` after `from torch.utils.data._utils.collate import
    default_collate`: the import is reported, and its fix makes this use public too."""
    root = node
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name):
        return False
    target = sem.imports.get(root.id)
    if target is None or target == root.id:
        return False  # `import torch`: no narrower import to point at
    return _public_twin(target, version) is not None or _public_module(target, version) is not None


def _public_twin(qualname: str, version: Version) -> str | None:
    entry = PRIVATE_ALIASES.get(qualname)
    if entry is not None:
        return entry[0] if version >= entry[1] else None
    for private, (public, since) in PRIVATE_MODULES.items():
        if (qualname == private or qualname.startswith(private + ".")) and version >= since:
            return public + qualname[len(private) :]
    return None


def _private_message(private: str, public: str) -> str:
    return (
        f"`{private}` is not public API (it can change or vanish in any release): use the "
        f"public `{public}`"
    )


def _private_reference_fix(ctx: RuleContext, node: ast.AST, public: str) -> Fix | None:
    if not isinstance(node, ast.Attribute):
        return None  # a bare imported name: the import statement carries the fix
    target = _spell(ctx.sem, node, public)
    if target is None:
        return None
    return Fix(f"Use `{target}`", (ctx.replace(node, target),))


def _private_import_findings(
    ctx: RuleContext, node: ast.Import | ast.ImportFrom
) -> Iterator[Finding]:
    version = ctx.torch_version
    if isinstance(node, ast.Import):
        for alias in node.names:
            public = _public_module(alias.name, version)
            if public is None:
                continue
            fix = None
            if (
                alias.asname is not None
                and len(node.names) == 1
                and ctx.is_single_line_statement(node)
            ):
                text = f"import {public} as {alias.asname}"
                fix = Fix(f"Use `{text}`", (ctx.replace(node, text),))
            yield from _unless_compat(
                ctx, "TD712", alias, _private_message(alias.name, public), fix
            )
        return
    if node.level or node.module is None:
        return
    public_module = _public_module(node.module, version)
    if public_module is not None:
        fix = None
        if ctx.is_single_line_statement(node):
            text = _rebuild_import_from(public_module, [(a.name, a.asname) for a in node.names])
            fix = Fix(f"Use `{text}`", (ctx.replace(node, text),))
        yield from _unless_compat(
            ctx, "TD712", node, _private_message(node.module, public_module), fix
        )
        return
    entries = list(_imported_qualnames(node))
    flagged = [(alias, q, _public_twin(q, version)) for alias, q in entries]
    flagged = [(alias, q, public) for alias, q, public in flagged if public is not None]
    if not flagged:
        return
    fix = None
    if len(flagged) == len(entries) and ctx.is_single_line_statement(node):
        modules = {public.rpartition(".")[0] for _, _, public in flagged}
        if len(modules) == 1:
            names = []
            for alias, _, public in flagged:
                new_name = public.rpartition(".")[2]
                names.append(
                    (new_name, alias.asname or (alias.name if new_name != alias.name else None))
                )
            text = _rebuild_import_from(modules.pop(), names)
            fix = Fix(f"Use `{text}`", (ctx.replace(node, text),))
    for alias, qualname, public in flagged:
        yield from _unless_compat(ctx, "TD712", alias, _private_message(qualname, public), fix)
        fix = None


def _public_module(module: str, version: Version) -> str | None:
    for private, (public, since) in PRIVATE_MODULES.items():
        if (module == private or module.startswith(private + ".")) and version >= since:
            return public + module[len(private) :]
    return None


# ---- TD713 -------------------------------------------------------------------------------------
@rule(
    "TD713",
    "deprecated-loss-args",
    Severity.WARNING,
    "`size_average=`/`reduce=` on a loss (deprecated since torch 0.4.1): use `reduction=`.",
    fixable=True,
)
def deprecated_loss_args(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for qualname in sorted(LEGACY_REDUCTION_LOSSES):
        for call in sem.calls_by_qualname.get(qualname, []):
            legacy = [k for k in call.keywords if k.arg in ("size_average", "reduce")]
            if not legacy:
                continue
            reduction = _legacy_reduction(legacy)
            names = " and ".join(f"`{k.arg}=`" for k in legacy)
            verb = "are" if len(legacy) > 1 else "is"
            message = (
                f"{names} on `{qualname.rsplit('.', 1)[-1]}` {verb} deprecated (torch warns "
                '"size_average and reduce args will be deprecated") and override `reduction=`'
            )
            if reduction is not None:
                message += f': use `reduction="{reduction}"`'
            fix = _legacy_reduction_fix(ctx, call, legacy, reduction)
            yield ctx.finding("TD713", legacy[0], message, fix)


def _legacy_reduction(legacy: list[ast.keyword]) -> str | None:
    """torch's own rule (torch.nn._reduction.legacy_get_string): None counts as True."""
    values: dict[str, bool] = {"size_average": True, "reduce": True}
    for keyword in legacy:
        value = keyword.value
        if _is_constant(value, None):
            continue
        if not (isinstance(value, ast.Constant) and isinstance(value.value, bool)):
            return None
        assert keyword.arg is not None
        values[keyword.arg] = value.value
    if values["size_average"] and values["reduce"]:
        return "mean"
    return "sum" if values["reduce"] else "none"


def _legacy_reduction_fix(
    ctx: RuleContext, call: ast.Call, legacy: list[ast.keyword], reduction: str | None
) -> Fix | None:
    if reduction is None:
        return None
    existing = _keyword(call, "reduction")
    edits = [ctx.replace(legacy[0], f'reduction="{reduction}"')]
    doomed: list[ast.AST] = [*legacy[1:], *([existing] if existing is not None else [])]
    if doomed:
        removals = remove_arguments(ctx, call, doomed)
        if removals is None:
            return None
        edits.extend(removals)
    spans = sorted(edit.span for edit in edits)
    if any(a.overlaps(b) for a, b in zip(spans, spans[1:], strict=False)):
        return None
    return Fix(f'Use `reduction="{reduction}"`', tuple(edits))


# ---- TD714 -------------------------------------------------------------------------------------
@rule(
    "TD714",
    "torchvision-module-alias",
    Severity.INFORMATION,
    "`import torchvision.models as models`: `from torchvision import models` says the same.",
    fixable=True,
    enabled_by_default=False,
)
def torchvision_module_alias(ctx: RuleContext) -> Iterator[Finding]:
    if not any(
        target.startswith("torchvision.") and target.rsplit(".", 1)[-1] == name
        for name, target in ctx.sem.imports.items()
    ):
        return
    for node in _import_nodes(ctx):
        if not isinstance(node, ast.Import):
            continue
        for alias in node.names:
            package, _, module = alias.name.rpartition(".")
            if not package.startswith("torchvision") or alias.asname != module:
                continue
            text = f"from {package} import {module}"
            message = f"`import {alias.name} as {module}` is `{text}`"
            fix = None
            if len(node.names) == 1 and ctx.is_single_line_statement(node):
                fix = Fix(f"Use `{text}`", (ctx.replace(node, text),))
            yield ctx.finding("TD714", node, message, fix)


# ---- TD715 -------------------------------------------------------------------------------------
@rule(
    "TD715",
    "unseeded-training",
    Severity.INFORMATION,
    "A training script that never seeds torch: runs cannot be reproduced.",
    fixable=True,
    enabled_by_default=False,
)
def unseeded_training(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    torch_root = sem.name_bound_to("torch", plain_first=True)
    if torch_root is None and not any(t.startswith("torch.") for t in sem.imports.values()):
        return
    loop = _first_training_loop(sem)
    if loop is None or _seeds_torch(sem):
        return
    if sem.enclosing_function(loop) is not None and not _top_level_runs_own_code(sem):
        return  # a library of training code: seeding is the job of the program that runs it
    header_end = loop.iter if isinstance(loop, ast.For | ast.AsyncFor) else loop.test
    start = ctx.doc.span_of(loop)
    end = ctx.doc.span_of(header_end)
    span = Span(start.start_line, start.start_col, end.end_line, end.end_col)
    message = (
        "this file trains a model but never seeds torch (`torch.manual_seed`): weight "
        "initialisation, dropout and shuffling differ on every run, so results cannot be "
        "reproduced"
    )
    yield ctx.finding("TD715", span, message, _seed_fix(ctx, torch_root))


def _first_training_loop(sem: Semantics) -> ast.For | ast.AsyncFor | ast.While | None:
    structure = training_of(sem)
    if structure.training_loops:
        return structure.training_loops[0].loop
    for call in structure.backward_calls:
        loops = sem.enclosing_loops(call)
        if loops:
            return loops[0]
    return None


def _top_level_runs_own_code(sem: Semantics) -> bool:
    """Whether the file's top-level code (a main guard included) calls or hands on a function
    or class the file defines: `main()`, `Trainer(cfg).fit()`, `fire.Fire(train)`."""
    defined = {
        statement.name
        for statement in sem.tree.body
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    if not defined:
        return False
    for statement in sem.tree.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and node.id in defined:
                return True
    return False


def _seeds_torch(sem: Semantics) -> bool:
    for call in sem.calls:
        qualname = sem.call_qualname(call)
        if qualname in SEEDING_CALLS:
            return True
        if qualname in NOT_SEEDING_CALLS:
            continue
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if re.search("seed", name, re.IGNORECASE):
            # a helper (`set_seed(42)`, `seed_everything(...)`) is trusted to seed torch
            return True
    return False


def _seed_fix(ctx: RuleContext, torch_root: str | None) -> Fix | None:
    if torch_root is None:
        return None
    imports = [
        statement
        for statement in ctx.sem.tree.body
        if isinstance(statement, ast.Import | ast.ImportFrom)
    ]
    if not imports or not ctx.statement_owns_lines(imports[-1]):
        return None
    last = ctx.doc.span_of(imports[-1])
    line = f"{torch_root}.manual_seed(0)"
    if last.end_line + 1 < len(ctx.doc.index.lines):
        edit = Edit(Span(last.end_line + 1, 0, last.end_line + 1, 0), line + ctx.doc.line_break())
    else:
        end_col = len(ctx.doc.index.line(last.end_line))
        edit = Edit(
            Span(last.end_line, end_col, last.end_line, end_col), ctx.doc.line_break() + line
        )
    return Fix(f"Insert `{line}` after the imports", (edit,), safe=False)
