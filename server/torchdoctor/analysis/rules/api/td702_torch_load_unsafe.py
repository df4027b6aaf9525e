"""TD702 torch-load-unsafe: `torch.load(..., weights_only=False)` (or, before torch 2.6, without
`weights_only`) runs arbitrary code from the file."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...call_edits import add_keyword
from ...context import RuleContext
from ...findings import Finding, Fix, Severity, called_names, rule
from ...semantics import Semantics
from ...tree_walk import walk
from .call_arguments import has_double_star, is_constant, keyword_named
from .symbol_findings import version_text

TORCH_LOAD = ("torch.load", "torch.serialization.load")
HUB_LOAD_STATE_DICT = ("torch.hub.load_state_dict_from_url",)


@rule(
    "TD702",
    "torch-load-unsafe",
    Severity.WARNING,
    "`torch.load(..., weights_only=False)` (or, before torch 2.6, without `weights_only`) runs "
    "arbitrary code from the file.",
    fixable=True,
    spells=called_names(*TORCH_LOAD, *HUB_LOAD_STATE_DICT),
)
def torch_load_unsafe(ctx: RuleContext) -> Iterator[Finding]:
    version = ctx.torch_version
    for call in ctx.sem.calls_to(*TORCH_LOAD):
        # pickle_module is torch.load's third positional parameter; weights_only=True refuses it
        custom_pickle = keyword_named(call, "pickle_module") is not None or len(call.args) >= 3
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
    weights_only = keyword_named(call, "weights_only")
    if weights_only is not None:
        if not is_constant(weights_only.value, False):
            return
        if _reads_own_buffer(ctx.sem, call) or _fallback_after_safe_load(ctx.sem, call):
            return
        message = (
            f"`{what}(..., weights_only=False)` unpickles arbitrary objects: a crafted file runs "
            "code on load; keep `weights_only=True` unless the file is your own"
        )
        fix: Fix | None = Fix(
            "Use `weights_only=True` (files holding arbitrary objects will then fail to load)",
            (ctx.replace(weights_only.value, "True"),),
            safe=False,
        )
        yield ctx.finding("TD702", weights_only, message, fix)
        return
    if not bare_is_unsafe or has_double_star(call) or _old_signature_fallback(ctx, call):
        return
    if what == "torch.load":
        message = (
            f"before torch 2.6 (target {version_text(ctx.torch_version)}) `torch.load` defaults "
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
    source = call.args[0] if call.args else getattr(keyword_named(call, "f"), "value", None)
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
        and (keyword := keyword_named(node, "weights_only")) is not None
        and not is_constant(keyword.value, False)
        for statement in attempt.body
        for node in walk(statement)
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
    if handler.type is None:
        return False  # a bare `except:` names no TypeError
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    if not any(isinstance(k, ast.Name) and k.id == "TypeError" for k in kinds):
        return False
    qualname = sem.call_qualname(call)
    return any(
        isinstance(node, ast.Call)
        and sem.call_qualname(node) == qualname
        and keyword_named(node, "weights_only") is not None
        for statement in attempt.body
        for node in walk(statement)
    )
