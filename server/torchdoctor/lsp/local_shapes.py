"""Every tensor's shape in the editor, from the last probe's shapes-by-line pass.

Pure functions: the probe's `line_shapes` rows and the current text in, hint labels and hover
text out. A row is shown only where its line still reads exactly as it did when probed (at the
same place, or moved by lines added elsewhere when that text occurs once): after an edit the
unchanged lines keep their shapes, marked stale; rewritten lines lose them. Rows come from every
file the forward ran through, so a helper module opened later gets its hints too.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..probe.shape_schema import LineShapes, LocalShape, LocalValue, TensorFacts
from . import probe_format

EVERY_LINE = "everyLine"
SUBMODULES = "submodules"
SCOPES = (EVERY_LINE, SUBMODULES)
RETURN_NAME = "return"
MAX_LABEL_CHARS = 90  # past this an inlay hint pushes the code off screen; the tooltip has it all


@dataclass(frozen=True)
class ShapeHint:
    line: int
    """0-based line of the current text where the hint goes (the statement's last line)."""
    label: str
    tooltip: str
    stale: bool


@dataclass(frozen=True)
class RowsForFile:
    """The probe's rows for one file, and whether the text they were taken on was this text."""

    rows: tuple[LineShapes, ...]
    probed_lines: tuple[str, ...] | None = None  # the probed text, when the server has it


def same_file(a: str, b: str) -> bool:
    return a == b or os.path.realpath(a) == os.path.realpath(b)


# --------------------------------------------------------------------------------------------
# Where a probed line is now
# --------------------------------------------------------------------------------------------


class CodeAnchors:
    """Maps a probed 1-based line to a 0-based line of the current text by its stripped code."""

    def __init__(self, current: Sequence[str]) -> None:
        self.current = current
        self._where: dict[str, list[int]] | None = None

    def find(self, row: LineShapes) -> int | None:
        index = row.line - 1
        if 0 <= index < len(self.current) and self.current[index].strip() == row.code:
            return index
        if not row.code:
            return None
        if self._where is None:
            self._where = {}
            for number, text in enumerate(self.current):
                self._where.setdefault(text.strip(), []).append(number)
        places = self._where.get(row.code, [])
        return places[0] if len(places) == 1 else None


def is_stale(
    rows: Iterable[LineShapes], current: Sequence[str], probed: Sequence[str] | None
) -> bool:
    if probed is not None:
        return tuple(probed) != tuple(current)
    return any(
        not (0 < row.line <= len(current) and current[row.line - 1].strip() == row.code)
        for row in rows
    )


# --------------------------------------------------------------------------------------------
# Statements
# --------------------------------------------------------------------------------------------

_COMPOUND = (
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.AsyncFor, ast.While,
    ast.If, ast.With, ast.AsyncWith, ast.Try,
)


def statement_at(tree: ast.AST | None, line: int) -> ast.stmt | None:
    """The innermost statement that contains 1-based `line`: the one with the shortest span."""
    if tree is None:
        return None
    found: ast.stmt | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if found is None or _span(node) < _span(found):
                found = node
    return found


def _span(node: ast.stmt) -> tuple[int, int]:
    return ((node.end_lineno or node.lineno) - node.lineno, -node.lineno)


def hint_line(statement: ast.stmt | None, line: int) -> int:
    """1-based line at whose end the hint goes: a simple statement's last line; a compound
    statement's header line (a `def`, a `for`)."""
    if statement is None or isinstance(statement, _COMPOUND):
        return line
    return statement.end_lineno or line


def calls_submodule(statement: ast.stmt | None) -> bool:
    """`self.conv(x)`, `self.blocks[i](x)`: the statement calls a module held by `self`."""
    if statement is None:
        return False
    for node in ast.walk(statement):
        if isinstance(node, ast.Call):
            callee = node.func
            while isinstance(callee, ast.Subscript):
                callee = callee.value
            if (
                isinstance(callee, ast.Attribute)
                and isinstance(callee.value, ast.Name)
                and callee.value.id == "self"
            ):
                return True
    return False


# --------------------------------------------------------------------------------------------
# Labels
# --------------------------------------------------------------------------------------------


def value_text(value: LocalValue) -> str:
    """(8, 10) for a tensor; ((8, 10), (8,)) for a tuple; [...] for a list; {k: ...} a dict."""
    shapes = [probe_format.shape(t.shape) for t in value.tensors]
    more = ", …" if value.count > len(value.tensors) else ""
    if value.kind == "tensor":
        return shapes[0]
    if value.kind == "dict":
        keys = value.keys or [str(i) for i in range(len(shapes))]
        return "{" + ", ".join(f"{k}: {s}" for k, s in zip(keys, shapes, strict=False)) + more + "}"
    opening, closing = ("[", "]") if value.kind == "list" else ("(", ")")
    return opening + ", ".join(shapes) + more + closing


def local_text(local: LocalShape) -> str:
    if local.varies:
        return f"{value_text(local.first)} … {value_text(local.last)}"
    return value_text(local.first)


def hint_label(row: LineShapes) -> str:
    """`→ q, k, v (2, 5, 32)`; `→ x (2, 8, 8, 8) … (2, 16, 4, 4) ×2` in a loop (first … last,
    runs); `→ (2, 10)` on a return line; names with different shapes are separated by `;`."""
    groups: dict[str, list[str]] = {}
    returned: str | None = None
    for local in row.names:
        text = local_text(local)
        if local.name == RETURN_NAME:
            returned = text
        else:
            groups.setdefault(text, []).append(local.name)
    parts = [f"{', '.join(names)} {text}" for text, names in groups.items()]
    if returned is not None:
        parts.append(returned if not parts else f"return {returned}")
    label = "→ " + "; ".join(parts)
    if row.hits > 1:
        label += f" ×{row.hits}"
    if len(label) > MAX_LABEL_CHARS:
        label = label[: MAX_LABEL_CHARS - 1] + "…"
    return label


def facts_text(facts: TensorFacts) -> str:
    grad = "requires_grad" if facts.requires_grad else "no grad"
    return (
        f"{probe_format.shape(facts.shape)} · {facts.dtype} · {facts.device} · {grad} · "
        f"{probe_format.size(facts.bytes)}"
    )


def value_lines(value: LocalValue) -> list[str]:
    if value.kind == "tensor":
        return [facts_text(value.tensors[0])]
    keys = value.keys or [str(i) for i in range(len(value.tensors))]
    lines = [f"{value.kind} of {value.count} tensor(s)"]
    lines += [f"[{key}] {facts_text(t)}" for key, t in zip(keys, value.tensors, strict=False)]
    return lines


def local_details(local: LocalShape, hits: int) -> list[str]:
    name = "returned" if local.name == RETURN_NAME else local.name
    if hits > 1 and local.varies:
        return (
            [f"{name}, first of {hits} runs: " + value_lines(local.first)[0]]
            + value_lines(local.first)[1:]
            + [f"{name}, last run: " + value_lines(local.last)[0]]
            + value_lines(local.last)[1:]
        )
    suffix = f" (same in all {hits} runs)" if hits > 1 else ""
    first = value_lines(local.first)
    return [f"{name}: {first[0]}{suffix}", *first[1:]]


def hint_tooltip(row: LineShapes) -> str:
    lines = [f"line {row.line} of {row.function}, ran {row.hits} time(s) in the probed forward"]
    for local in row.names:
        lines += local_details(local, row.hits)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Hints and hovers
# --------------------------------------------------------------------------------------------


def shape_hints(
    source: RowsForFile, current: Sequence[str], tree: ast.AST | None, scope: str = EVERY_LINE
) -> list[ShapeHint]:
    """One hint per statement that bound a tensor on a line that ran."""
    stale = is_stale(source.rows, current, source.probed_lines)
    anchors = CodeAnchors(current)
    by_line: dict[int, ShapeHint] = {}
    for row in source.rows:
        if not row.names:
            continue
        now = anchors.find(row)
        if now is None:
            continue
        statement = statement_at(tree, now + 1)
        if scope == SUBMODULES and not calls_submodule(statement):
            continue
        line = hint_line(statement, now + 1) - 1
        hint = ShapeHint(line, hint_label(row), hint_tooltip(row), stale)
        known = by_line.get(line)
        if known is not None:  # two physical lines of one statement: keep both, in order
            hint = ShapeHint(
                line, f"{known.label} · {hint.label}", f"{known.tooltip}\n{hint.tooltip}", stale
            )
        by_line[line] = hint
    return [by_line[line] for line in sorted(by_line)]


def function_at(tree: ast.AST | None, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost function whose body contains 1-based `line`."""
    if tree is None:
        return None
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.lineno <= line <= (node.end_lineno or node.lineno):
                if found is None or node.lineno >= found.lineno:
                    found = node
    return found


def name_at(tree: ast.AST | None, line: int, column: int) -> str | None:
    """The local name (or argument) under 0-based `column` of 1-based `line`."""
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Name | ast.arg) and node.lineno == line:
            start = node.col_offset
            name = node.id if isinstance(node, ast.Name) else node.arg
            if start <= column <= start + len(name):
                return name
    return None


def local_hover(
    source: RowsForFile, current: Sequence[str], tree: ast.AST | None, line: int, column: int
) -> str | None:
    """Markdown for the local under the cursor (0-based line and character): the value the probe
    saw bound to it, at the nearest binding line at or above the cursor in the same function."""
    text = current[line] if 0 <= line < len(current) else ""
    name = name_at(tree, line + 1, len(text[:column].encode("utf-8")))  # ast counts UTF-8 bytes
    function = function_at(tree, line + 1)
    if name is None or function is None:
        return None
    anchors = CodeAnchors(current)
    first, last = function.lineno - 1, (function.end_lineno or function.lineno) - 1
    candidates: list[tuple[int, LineShapes, LocalShape]] = []
    for row in source.rows:
        local = next((item for item in row.names if item.name == name), None)
        if local is None:
            continue
        now = anchors.find(row)
        if now is not None and first <= now <= last:
            candidates.append((now, row, local))
    if not candidates:
        return None
    above = [item for item in candidates if item[0] <= line]
    now, row, local = max(above, key=lambda item: item[0]) if above else min(candidates)
    stale = is_stale(source.rows, current, source.probed_lines)
    where = f"bound on line {now + 1}" + (" (stale: the file changed since)" if stale else "")
    details = "\n".join(f"- {text}" for text in local_details(local, row.hits))
    return f"**`{name}`** in `{row.function}` — last probe, {where}\n\n{details}"


def rows_for(rows: Iterable[LineShapes], path: str) -> tuple[LineShapes, ...]:
    return tuple(row for row in rows if same_file(row.file, path))
