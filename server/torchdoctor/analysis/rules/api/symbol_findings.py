"""Findings on removed and deprecated symbols (TD707, TD708) at calls, references and imports,
and the fixes that replace them."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from ...call_edits import add_keyword
from ...context import RuleContext
from ...findings import Finding, Fix
from ...semantics import Semantics
from .call_arguments import (
    argument_nodes,
    arguments_text,
    has_star,
    is_constant,
    is_one,
    keyword_named,
    replace_call,
)
from .references import (
    attribute_references,
    import_nodes,
    imported_qualnames,
    imports_any,
    rebuild_import_from,
    spell,
)
from .symbols import DEPRECATED, REMOVED, REMOVED_MODULES, ApiSymbol, Version
from .version_guards import unless_compat

# Removed functions whose name is a module now: only a call is a mistake.
MODULES_NOW = frozenset({"torch.fft"})
_LISTED = frozenset(REMOVED) | frozenset(DEPRECATED)
_REMOVED_MODULE_NAMES = tuple(REMOVED_MODULES)


def _applies(version: Version, since: Version | None) -> bool:
    return since is None or version >= since


def version_text(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


def _code_for(symbol: ApiSymbol, version: Version) -> str | None:
    if symbol.removed_in is not None and version >= symbol.removed_in:
        return "TD707"
    if _applies(version, symbol.deprecated_in):
        return "TD708"
    return None


def _symbol_message(symbol: ApiSymbol, code: str, imported: bool = False) -> str:
    name = symbol.qualname
    if code == "TD707":
        when = f" by torch {version_text(symbol.removed_in)}" if symbol.removed_in else ""
        how = "importing it fails" if imported else "calling it raises"
        return f"`{name}` was removed{when} ({how}): use {symbol.replacement}"
    since = f" since torch {version_text(symbol.deprecated_in)}" if symbol.deprecated_in else ""
    if symbol.evidence == "docs":
        state = f"deprecated{since} (its documentation says so; it does not warn)"
    elif symbol.evidence == "raises":
        state = f"deprecated{since} and removed in later torch releases"
    else:
        state = f"deprecated{since} (torch warns when it runs)"
    return f"`{name}` is {state}: use {symbol.replacement}"


def api_symbol_findings(ctx: RuleContext, code: str) -> Iterator[Finding]:
    sem = ctx.sem
    version = ctx.torch_version
    called = sem.calls_by_qualname.keys()
    for table in (REMOVED, DEPRECATED):
        if called.isdisjoint(table.keys()):  # two views: the smaller one is iterated
            continue  # one set operation: most files call nothing listed
        for qualname, listed in table.items():
            calls = sem.calls_by_qualname.get(qualname)
            if not calls or _code_for(listed, version) != code:
                continue
            for call in calls:
                fix = _symbol_call_fix(ctx, call, listed)
                if fix is None and _reached_through_reported_import(sem, call.func, code, version):
                    continue
                yield from unless_compat(ctx, code, call.func, _symbol_message(listed, code), fix)
    for reference in attribute_references(sem):
        if reference.qualname in MODULES_NOW:
            continue
        symbol = REMOVED.get(reference.qualname) or DEPRECATED.get(reference.qualname)
        if symbol is None or _code_for(symbol, version) != code:
            continue
        fix = None
        if symbol.rename is not None:
            target = spell(sem, reference.node, symbol.rename)
            if target is not None:
                fix = Fix(
                    f"Use `{target}`",
                    (ctx.replace(reference.node, target),),
                    safe=symbol.rename_is_safe,
                )
        if fix is None and _reached_through_reported_import(sem, reference.node, code, version):
            continue
        yield from unless_compat(ctx, code, reference.node, _symbol_message(symbol, code), fix)
    if not _imports_listed(ctx):
        return
    for node in import_nodes(ctx):
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


def _imports_listed(ctx: RuleContext) -> bool:
    """Whether an import may bind a listed symbol or removed module (`imports_any`): the same
    for TD707 and TD708, so it is asked once per document (its scan of the text costs more
    than the rest of either rule on most files)."""
    found: bool | None = ctx.sem.derived.get(_IMPORTS_LISTED)
    if found is None:
        found = ctx.sem.derived[_IMPORTS_LISTED] = imports_any(
            ctx, _LISTED, text_hints=_REMOVED_MODULE_NAMES
        )
    return found


_IMPORTS_LISTED = "api:imports-listed-symbols"


def _removed_module_finding(
    ctx: RuleContext, code: str, node: ast.AST, module: str
) -> Iterator[Finding]:
    for removed, (since, replacement) in REMOVED_MODULES.items():
        if module == removed or module.startswith(removed + "."):
            if ctx.torch_version >= since and code == "TD707":
                message = (
                    f"`{removed}` was removed in torch {version_text(since)} (the import raises "
                    f"ModuleNotFoundError): use {replacement}"
                )
                yield from unless_compat(ctx, "TD707", node, message)
            return


def _symbol_import_findings(ctx: RuleContext, code: str, node: ast.ImportFrom) -> Iterator[Finding]:
    version = ctx.torch_version
    entries = list(imported_qualnames(node))
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
        yield from unless_compat(
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
    text = rebuild_import_from(modules.pop(), [(a.name, a.asname) for a, _ in entries])
    return Fix(f"Use `{text}`", (ctx.replace(node, text),), safe=safe)


def _symbol_call_fix(ctx: RuleContext, call: ast.Call, symbol: ApiSymbol) -> Fix | None:
    special = SPECIAL_CALL_FIXES.get(symbol.qualname)
    if special is not None:
        return special(ctx, call)
    if symbol.rename is None:
        return None
    target = spell(ctx.sem, call.func, symbol.rename)
    if target is None or not isinstance(call.func, ast.Attribute):
        return None
    return Fix(f"Use `{target}`", (ctx.replace(call.func, target),), safe=symbol.rename_is_safe)


def _linalg(ctx: RuleContext, call: ast.Call, name: str) -> str | None:
    if not isinstance(call.func, ast.Attribute):
        return None
    return spell(ctx.sem, call.func, f"torch.linalg.{name}")


def _fix_solve(ctx: RuleContext, call: ast.Call) -> Fix | None:
    """`torch.solve(B, A).solution` / `torch.solve(B, A)[0]` → `torch.linalg.solve(A, B)`."""
    if len(call.args) != 2 or call.keywords or has_star(call):
        return None
    parent = ctx.sem.parent(call)
    if isinstance(parent, ast.Attribute) and parent.attr == "solution":
        whole: ast.AST = parent
    elif isinstance(parent, ast.Subscript) and is_constant(parent.slice, 0):
        whole = parent
    else:
        return None
    target = _linalg(ctx, call, "solve")
    if target is None:
        return None
    b, a = (ctx.doc.source_of(arg) for arg in call.args)
    text = f"{target}({a}, {b})"
    return Fix(f"Use `{text}`", (ctx.replace(whole, text),))


# builds the fix for a call of one removed or deprecated function, when it can
CallFix = Callable[[RuleContext, ast.Call], Fix | None]


def _fix_rename_simple(
    name: str, *, max_positional: int, keywords: tuple[str, ...] = ()
) -> CallFix:
    def fix(ctx: RuleContext, call: ast.Call) -> Fix | None:
        if len(call.args) > max_positional or has_star(call):
            return None
        if any(keyword.arg not in keywords for keyword in call.keywords):
            return None
        target = _linalg(ctx, call, name)
        if target is None:
            return None
        return Fix(f"Use `{target}`", (ctx.replace(call.func, target),))

    return fix


def _fix_qr(ctx: RuleContext, call: ast.Call) -> Fix | None:
    if has_star(call) or len(call.args) != 1:
        return None
    some = keyword_named(call, "some")
    if [k for k in call.keywords if k.arg != "some"]:
        return None
    target = _linalg(ctx, call, "qr")
    if target is None:
        return None
    edits = [ctx.replace(call.func, target)]
    if some is not None:
        if is_constant(some.value, False):
            edits.append(ctx.replace(some, 'mode="complete"'))
        elif is_constant(some.value, True):
            edits.append(ctx.replace(some, 'mode="reduced"'))
        else:
            return None
    return Fix(f"Use `{target}`", tuple(edits))


def _fix_chain_matmul(ctx: RuleContext, call: ast.Call) -> Fix | None:
    if len(call.args) < 2 or call.keywords or has_star(call):
        return None
    target = _linalg(ctx, call, "multi_dot")
    if target is None:
        return None
    text = f"{target}([{arguments_text(ctx, call)}])"
    if "\n" in text:
        return None
    return Fix(f"Use `{target}([...])`", (replace_call(ctx, call, text),))


def _fix_cholesky(ctx: RuleContext, call: ast.Call) -> Fix | None:
    if len(call.args) != 1 or has_star(call):
        return None
    upper = keyword_named(call, "upper")
    if [k for k in call.keywords if k.arg != "upper"]:
        return None
    target = _linalg(ctx, call, "cholesky")
    if target is None:
        return None
    source = ctx.doc.source_of(call.args[0])
    if upper is None or is_constant(upper.value, False):
        text = f"{target}({source})"
    elif is_constant(upper.value, True):
        text = f"{target}({source}).mH"
    else:
        return None
    return Fix(f"Use `{text}`", (replace_call(ctx, call, text),))


def _fix_lu_solve(ctx: RuleContext, call: ast.Call) -> Fix | None:
    if len(call.args) != 3 or call.keywords or has_star(call):
        return None
    target = _linalg(ctx, call, "lu_solve")
    if target is None:
        return None
    b, lu, pivots = (ctx.doc.source_of(arg) for arg in call.args)
    text = f"{target}({lu}, {pivots}, {b})"
    return Fix(f"Use `{text}`", (replace_call(ctx, call, text),))


def _fix_norm(ctx: RuleContext, call: ast.Call) -> Fix | None:
    """`torch.norm(x)` is the 2-norm of all elements: `torch.linalg.vector_norm(x)`."""
    if len(call.args) != 1 or call.keywords or has_star(call):
        return None
    target = _linalg(ctx, call, "vector_norm")
    if target is None:
        return None
    return Fix(f"Use `{target}`", (ctx.replace(call.func, target),))


def _fix_range(ctx: RuleContext, call: ast.Call) -> Fix | None:
    """`torch.range(a, b)` → `torch.arange(a, b + 1, ...)`: integer literals and step 1 only,
    where the two agree exactly; torch.range's default dtype is float32, arange's int64."""
    if has_star(call) or not isinstance(call.func, ast.Attribute):
        return None
    if len(call.args) == 3 and is_one(call.args[2]):
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
    target = spell(ctx.sem, call.func, "torch.arange")
    root = spell(ctx.sem, call.func, "torch.float32")
    if target is None or root is None:
        return None
    assert isinstance(end, ast.Constant) and type(end.value) is int  # checked above
    parts = [ctx.doc.source_of(start), str(end.value + 1)]
    safe = keyword_named(call, "dtype") is not None
    if not safe:
        parts.append(f"dtype={root}")
    parts.extend(ctx.doc.source_of(keyword) for keyword in call.keywords)
    text = f"{target}({', '.join(parts)})"
    # torch.range follows torch.get_default_dtype(): float32 unless the program changed it
    return Fix(f"Use `{text}`", (replace_call(ctx, call, text),), safe=safe)


def _fix_upsampling_module(mode_arguments: str) -> CallFix:
    def fix(ctx: RuleContext, call: ast.Call) -> Fix | None:
        if has_star(call) or len(call.args) > 2 or not isinstance(call.func, ast.Attribute):
            return None
        if [k for k in call.keywords if k.arg not in ("size", "scale_factor")]:
            return None
        target = spell(ctx.sem, call.func, "torch.nn.Upsample")
        if target is None:
            return None
        arguments = [arguments_text(ctx, call)] if argument_nodes(call) else []
        text = f"{target}({', '.join([*arguments, mode_arguments])})"
        if "\n" in text:
            return None
        return Fix(f"Use `{text}`", (replace_call(ctx, call, text),))

    return fix


def _fix_upsample_function(mode_arguments: str) -> CallFix:
    def fix(ctx: RuleContext, call: ast.Call) -> Fix | None:
        if has_star(call) or len(call.args) > 3 or not isinstance(call.func, ast.Attribute):
            return None
        if [k for k in call.keywords if k.arg not in ("input", "size", "scale_factor")]:
            return None
        target = spell(ctx.sem, call.func, "torch.nn.functional.interpolate")
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
    setter = spell(ctx.sem, call.func, "torch.set_default_dtype")
    value = spell(ctx.sem, call.func, f"torch.{dtype}")
    if setter is None or value is None:
        return None
    text = f"{setter}({value})"
    return Fix(f"Use `{text}`", (replace_call(ctx, call, text),))


def _fix_register_pytree_node(ctx: RuleContext, call: ast.Call) -> Fix | None:
    if len(call.args) > 3 or call.keywords or has_star(call):
        return None
    if not isinstance(call.func, ast.Attribute):
        return None
    target = spell(ctx.sem, call.func, "torch.utils._pytree.register_pytree_node")
    if target is None:
        return None
    return Fix(f"Use `{target}`", (ctx.replace(call.func, target),))


SPECIAL_CALL_FIXES: dict[str, CallFix] = {
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
