"""What hovers and CodeLens need to know about a document version: the names its imports bind
and its nn.Module classes. Built from the engine's semantics once per version, on demand, and
kept small (the semantics' parent map of every node is not kept)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..analysis import Document, Span


@dataclass(frozen=True)
class ModuleClass:
    name: str
    # the `class Name` header: where the lens goes (decorators stay above it)
    header: Span


@dataclass(frozen=True)
class Outline:
    imports: dict[str, str]
    module_classes: tuple[ModuleClass, ...]


def build_outline(document: Document) -> Outline:
    semantics = document.semantics
    classes = [
        ModuleClass(node.name, _header(document, node))
        for node in semantics.module_classes.values()
    ]
    classes.sort(key=lambda item: (item.header.start_line, item.header.start_col))
    return Outline(dict(semantics.imports), tuple(classes))


def _header(document: Document, node: ast.ClassDef) -> Span:
    line = node.lineno - 1
    text = document.index.line(line)
    start = document.index.byte_to_char(line, node.col_offset)
    name_at = text.find(node.name, start + len("class"))
    end = name_at + len(node.name) if name_at >= 0 else len(text)
    return Span(line, start, line, end)
