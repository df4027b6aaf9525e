"""Which torch API a position in a document names, resolved through the file's own imports and
aliases (`import torch as T; T.Tensor.view`, `import torch.nn.functional as F; F.relu`) or, for
methods on receivers whose type nobody knows without running the code, by the method's name
(`x.view(...)`, `model(x).item()`). Pure syntax: no jedi, so hovers answer at once."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..analysis import Document, Span
from ..analysis.semantics import dotted_name
from . import pitfall_notes

TORCH_ROOTS = ("torch", "torchvision", "torchaudio", "torchtext")


@dataclass(frozen=True)
class ApiTarget:
    label: str  # what the hover's title says
    span: Span  # the name under the cursor
    note: str | None  # key into pitfall_notes.NOTES
    describe: str | None  # qualified name for jedi's signature and docstring


def api_at(document: Document, imports: dict[str, str], line: int, col: int) -> ApiTarget | None:
    """The torch API named at (0-based line, code-point column), if any."""
    text = document.index.line(line)
    byte_col = len(text[:col].encode("utf-8", errors="surrogatepass"))
    path = nodes_at(document.tree, line + 1, byte_col)
    for depth in range(len(path) - 1, -1, -1):
        node = path[depth]
        parents = path[:depth]
        target: ApiTarget | None = None
        if isinstance(node, ast.keyword):
            target = _keyword_target(document, imports, node, parents, line + 1, byte_col)
        elif isinstance(node, ast.Attribute):
            target = _attribute_target(document, imports, node, line + 1, byte_col)
        elif isinstance(node, ast.Name):
            target = _name_target(document, imports, node)
        elif isinstance(node, ast.alias):
            target = _alias_target(document, node, parents)
        if target is not None or isinstance(node, ast.Attribute | ast.Name | ast.keyword):
            return target
    return None


def nodes_at(tree: ast.Module, lineno: int, byte_col: int) -> list[ast.AST]:
    """The chain of nodes, outermost first, whose source range holds (1-based line, byte col).

    Only children whose line range can hold the position are visited, so a hover in a long file
    looks at one statement's subtree, not the whole tree.
    """
    path: list[ast.AST] = []
    children: list[ast.AST] = list(tree.body)
    while children:
        chosen: ast.AST | None = None
        pending: list[ast.AST] = []
        for child in children:
            if not hasattr(child, "lineno"):
                # `arguments`, `comprehension`, `withitem` and operators have no position:
                # look through them at their children
                pending.extend(ast.iter_child_nodes(child))
                continue
            if _contains(child, lineno, byte_col):
                chosen = child
                break
        if chosen is None:
            if not pending:
                break
            children = pending
            continue
        path.append(chosen)
        children = list(ast.iter_child_nodes(chosen))
    return path


def _contains(node: ast.AST, lineno: int, byte_col: int) -> bool:
    start = (node.lineno, node.col_offset)  # type: ignore[attr-defined]  # nodes here have lineno
    decorators = getattr(node, "decorator_list", None)
    if decorators:
        # a decorated definition starts at its `def`/`class` line; its decorators sit above
        first = decorators[0]
        start = min(start, (first.lineno, first.col_offset))
    end_line = getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]  # nodes here have lineno
    end_col = getattr(node, "end_col_offset", None)
    if end_col is None:
        return start <= (lineno, byte_col) and lineno <= end_line
    return start <= (lineno, byte_col) < (end_line, end_col)


def _resolve(imports: dict[str, str], dotted: str) -> str | None:
    head, _, rest = dotted.partition(".")
    target = imports.get(head)
    if target is None:
        return None
    return f"{target}.{rest}" if rest else target


def _is_torch(qualname: str) -> bool:
    return qualname.split(".", 1)[0] in TORCH_ROOTS


def _qualname_target(qualname: str, span: Span) -> ApiTarget | None:
    if not _is_torch(qualname):
        return None
    return ApiTarget(qualname, span, pitfall_notes.note_for_qualname(qualname), qualname)


def _name_target(document: Document, imports: dict[str, str], node: ast.Name) -> ApiTarget | None:
    qualname = imports.get(node.id)
    if qualname is None:
        return None
    return _qualname_target(qualname, document.span_of(node))


def _attribute_target(
    document: Document, imports: dict[str, str], node: ast.Attribute, lineno: int, byte_col: int
) -> ApiTarget | None:
    # only the attribute's own name counts: `x` in `x.view` is the receiver's business
    end_line = node.end_lineno or node.lineno
    end_col = node.end_col_offset or 0
    if lineno != end_line or not end_col - len(node.attr.encode("utf-8")) <= byte_col < end_col:
        return None
    span = document.span_of(node)
    name_span = Span(span.end_line, span.end_col - len(node.attr), span.end_line, span.end_col)
    dotted = dotted_name(node)
    if dotted is not None and dotted.partition(".")[0] in imports:
        qualname = _resolve(imports, dotted)
        return _qualname_target(qualname, name_span) if qualname else None
    note = pitfall_notes.note_for_method(node.attr)
    if note is None:
        return None
    describe = pitfall_notes.NOTES[note].describe
    return ApiTarget(f".{node.attr}()", name_span, note, describe)


def _keyword_target(
    document: Document,
    imports: dict[str, str],
    node: ast.keyword,
    parents: list[ast.AST],
    lineno: int,
    byte_col: int,
) -> ApiTarget | None:
    if node.arg is None or node.lineno != lineno:
        return None
    if not node.col_offset <= byte_col < node.col_offset + len(node.arg.encode("utf-8")):
        return None  # on the value, not the keyword: a deeper node answers
    call = parents[-1] if parents else None
    if not isinstance(call, ast.Call):
        return None
    call_note = _call_note(imports, call.func)
    if call_note is None:
        return None
    note = pitfall_notes.note_for_argument(call_note, node.arg)
    if note is None:
        return None
    start = document.index.byte_to_char(node.lineno - 1, node.col_offset)
    span = Span(node.lineno - 1, start, node.lineno - 1, start + len(node.arg))
    return ApiTarget(f"{node.arg}=", span, note, pitfall_notes.NOTES[note].describe)


def _call_note(imports: dict[str, str], func: ast.AST) -> str | None:
    dotted = dotted_name(func)
    if dotted is not None and dotted.partition(".")[0] in imports:
        qualname = _resolve(imports, dotted)
        return pitfall_notes.note_for_qualname(qualname) if qualname else None
    if isinstance(func, ast.Attribute):
        return pitfall_notes.note_for_method(func.attr)
    return None


def _alias_target(document: Document, node: ast.alias, parents: list[ast.AST]) -> ApiTarget | None:
    statement = parents[-1] if parents else None
    if isinstance(statement, ast.ImportFrom):
        if statement.level or statement.module is None:
            return None
        qualname = f"{statement.module}.{node.name}"
    elif isinstance(statement, ast.Import):
        qualname = node.name
    else:
        return None
    return _qualname_target(qualname, document.span_of(node))
