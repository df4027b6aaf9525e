"""Jupyter notebook files (nbformat 4 JSON): their cells in, edited cell sources back out.

Writing back replaces only the JSON value of each edited cell's `source`, in the file's own
text: every other byte (outputs, metadata, key order, indentation, escapes, number spellings,
the trailing newline) stays exactly as it was. A re-serialised notebook would respell floats
and escapes in outputs and metadata the user never touched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]  # exists at runtime; typeshed omits it

NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
SPECIAL_NUMBER = re.compile(r"-?(?:NaN|Infinity)")
SOURCE_LINE = re.compile(r"[^\n]*\n|[^\n]+")
WHITESPACE = re.compile(r"[ \t\n\r]*")
LITERALS = ("true", "false", "null")


class NotebookError(ValueError):
    """The file is not a notebook this tool can read (not JSON, not nbformat 4)."""


@dataclass(frozen=True)
class NotebookCell:
    number: int  # 1-based position among all the notebook's cells, markdown included
    kind: str  # "code", "markdown", "raw"
    source: str
    # where the cell's `source` value lies in the file's text: [start, end)
    source_start: int
    source_end: int


@dataclass(frozen=True)
class NotebookFile:
    text: str
    cells: tuple[NotebookCell, ...]
    language: str  # from metadata: "python" unless the kernel says otherwise

    @property
    def code_cells(self) -> tuple[NotebookCell, ...]:
        return tuple(cell for cell in self.cells if cell.kind == "code")


def read_notebook(text: str) -> NotebookFile:
    """The notebook in `text`; NotebookError says why it is not one."""
    try:
        data = json.loads(text)
    except ValueError as error:
        raise NotebookError(f"not valid JSON: {error}") from None
    except RecursionError:
        raise NotebookError("not readable: the JSON nests too deeply") from None
    if not isinstance(data, dict):
        raise NotebookError("not a notebook: the JSON is not an object")
    if data.get("nbformat") != 4 or not isinstance(data.get("cells"), list):
        major = data.get("nbformat")
        raise NotebookError(f"not an nbformat 4 notebook (nbformat: {major!r})")
    spans = _source_spans(text)
    cells = []
    for number, cell in enumerate(data["cells"], 1):
        if not isinstance(cell, dict):
            raise NotebookError(f"cell {number} is not an object")
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(part, str) for part in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise NotebookError(f"cell {number}: `source` is neither text nor a list of text")
        start, end = spans.get(number - 1, (-1, -1))
        kind = cell.get("cell_type")
        cells.append(
            NotebookCell(number, kind if isinstance(kind, str) else "", source, start, end)
        )
    return NotebookFile(text, tuple(cells), _language(data.get("metadata")))


def _language(metadata: object) -> str:
    if not isinstance(metadata, Mapping):
        return "python"
    info = metadata.get("language_info")
    if isinstance(info, Mapping) and isinstance(info.get("name"), str):
        return str(info["name"]).lower()
    kernel = metadata.get("kernelspec")
    if isinstance(kernel, Mapping) and isinstance(kernel.get("language"), str):
        return str(kernel["language"]).lower()
    return "python"


def with_sources(notebook: NotebookFile, sources: Mapping[int, str]) -> str:
    """The file's text with the `source` of the cells numbered in `sources` replaced, written in
    the form the old value had (a list of lines or one string) at its indentation."""
    text = notebook.text
    ensure_ascii = _escapes_non_ascii(text)
    cells = sorted(
        (cell for cell in notebook.cells if cell.number in sources and cell.source_start >= 0),
        key=lambda cell: cell.source_start,
        reverse=True,
    )
    for cell in cells:
        new = sources[cell.number]
        if new == cell.source:
            continue
        old_value = text[cell.source_start : cell.source_end]
        value = _source_value(new, old_value, text, cell.source_start, ensure_ascii)
        text = text[: cell.source_start] + value + text[cell.source_end :]
    return text


def _source_value(source: str, old_value: str, text: str, start: int, ensure_ascii: bool) -> str:
    if old_value.startswith('"'):
        return json.dumps(source, ensure_ascii=ensure_ascii)
    parts = SOURCE_LINE.findall(source)  # split after each \n, as Jupyter writes sources
    encoded = [json.dumps(part, ensure_ascii=ensure_ascii) for part in parts]
    unit = _indent_unit(text)
    if not encoded:
        return "[]"
    if "\n" not in old_value and (old_value != "[]" or unit is None):
        # `["a\n", "b"]` on one line, or a file written without line breaks
        separator = ", " if ", " in old_value or old_value == "[]" else ","
        return "[" + separator.join(encoded) + "]"
    item_indent = re.match(r"\[[ \t]*\r?\n([ \t]*)", old_value)
    close_indent = re.search(r"\n([ \t]*)\]$", old_value)
    closing = close_indent.group(1) if close_indent else _line_indent(text, start)
    inner = item_indent.group(1) if item_indent else closing + (unit or " ")
    newline = "\r\n" if "\r\n" in text else "\n"
    body = ("," + newline + inner).join(encoded)
    return f"[{newline}{inner}{body}{newline}{closing}]"


def _indent_unit(text: str) -> str | None:
    """One level of the file's indentation (Jupyter writes one space), None when the file
    has no line breaks between its keys."""
    match = re.match(r"\s*\{[ \t]*\r?\n([ \t]+)\S", text)
    return match.group(1) if match else None


def _line_indent(text: str, offset: int) -> str:
    line_start = text.rfind("\n", 0, offset) + 1
    line = text[line_start:offset]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _escapes_non_ascii(text: str) -> bool:
    """Whether the file writes non-ASCII text as \\u escapes (as nbformat does not, but some
    tools do): new text is written the same way."""
    return text.isascii() and "\\u" in text


# ---- where each cell's `source` lies in the text -------------------------------------------
def _source_spans(text: str) -> dict[int, tuple[int, int]]:
    """0-based cell index -> the [start, end) of its `source` value. The text has already been
    read by `json.loads`, so it is valid JSON: this walk only needs to find positions."""
    spans: dict[int, tuple[int, int]] = {}
    position = _skip(text, 0)
    if position >= len(text) or text[position] != "{":
        return spans
    position += 1
    while True:
        position = _skip(text, position)
        if text[position] == "}":
            return spans
        key, position = scanstring(text, position + 1)
        position = _skip(text, position) + 1  # the colon
        position = _skip(text, position)
        if key == "cells" and text[position] == "[":
            position = _cells(text, position, spans)
        else:
            position = _value_end(text, position)
        position = _skip(text, position)
        if text[position] == ",":
            position += 1


def _cells(text: str, position: int, spans: dict[int, tuple[int, int]]) -> int:
    index = 0
    position += 1
    while True:
        position = _skip(text, position)
        if text[position] == "]":
            return position + 1
        if text[position] == "{":
            position = _cell(text, position, index, spans)
        else:
            position = _value_end(text, position)
        index += 1
        position = _skip(text, position)
        if text[position] == ",":
            position += 1


def _cell(text: str, position: int, index: int, spans: dict[int, tuple[int, int]]) -> int:
    position += 1
    while True:
        position = _skip(text, position)
        if text[position] == "}":
            return position + 1
        key, position = scanstring(text, position + 1)
        position = _skip(text, _skip(text, position) + 1)
        end = _value_end(text, position)
        if key == "source":
            spans[index] = (position, end)  # a repeated key: json.loads keeps the last too
        position = _skip(text, end)
        if text[position] == ",":
            position += 1


def _value_end(text: str, position: int) -> int:
    """The end of the JSON value starting at `position` (iterative: no recursion limit)."""
    depth = 0
    while True:
        position = _skip(text, position)
        char = text[position]
        if char == '"':
            _, position = scanstring(text, position + 1)
        elif char in "[{":
            depth += 1
            position += 1
            continue
        elif char in "]}":
            depth -= 1
            position += 1
        elif char == "," or char == ":":
            position += 1
            continue
        else:
            literal = next((word for word in LITERALS if text.startswith(word, position)), None)
            if literal is not None:
                position += len(literal)
            else:
                # NaN and Infinity: json.loads accepts them, so a file may hold them
                match = NUMBER.match(text, position) or SPECIAL_NUMBER.match(text, position)
                position = match.end() if match else position + 1
        if depth == 0:
            return position


def _skip(text: str, position: int) -> int:
    match = WHITESPACE.match(text, position)
    return match.end() if match else position
