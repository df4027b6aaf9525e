"""How the probe is told to build a model: `--init` JSON, `--factory module:function`, and the
`# torchdoctor: init={...}` comment (standard library only; the client and the runner both
read it, the runner loading this file by path, see runner/companions.py)."""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from dataclasses import dataclass
from typing import Any

MAX_INIT_CHARS = 100_000
_INIT_COMMENT = re.compile(r"#\s*torchdoctor:\s*init\s*=\s*(.+?)\s*$")
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_FACTORY = re.compile(rf"({_DOTTED}):({_DOTTED})")


class InitArgumentError(ValueError):
    """Constructor arguments or a factory that cannot be read; `line` is the comment's."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def parse_init(text: str, where: str = "--init") -> dict[str, Any]:
    """Keyword arguments for the model's `__init__` from a JSON object."""
    if len(text) > MAX_INIT_CHARS:
        raise InitArgumentError(f"{where} is longer than {MAX_INIT_CHARS} characters")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InitArgumentError(
            f"{where} is not JSON ({exc.msg} at position {exc.pos + 1}); write keyword "
            'arguments as a JSON object, e.g. {"num_classes": 5, "hidden": 64}'
        ) from None
    if not isinstance(value, dict):
        raise InitArgumentError(
            f"{where} must be a JSON object of keyword arguments, not {type(value).__name__}: "
            'e.g. {"num_classes": 5}'
        )
    bad = [key for key in value if not key.isidentifier()]
    if bad:
        raise InitArgumentError(f"{where} has keys that are not argument names: {bad}")
    return value


def parse_factory(text: str) -> tuple[str, str]:
    """(module, attribute path) from `package.module:function`."""
    match = _FACTORY.fullmatch(text.strip())
    if match is None:
        raise InitArgumentError(
            f"--factory must look like module:function (e.g. models.zoo:make_model), not {text!r}"
        )
    return match.group(1), match.group(2)


@dataclass(frozen=True)
class InitComment:
    arguments: dict[str, Any]
    line: int


def init_comment(source: str, class_name: str) -> InitComment | None:
    """The `# torchdoctor: init={...}` comment on the `class` line of `class_name` or in the
    comment block right above it (or its decorators). InitArgumentError when it is not JSON."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    span = None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            span = (first, node.lineno)
            break
    if span is None:
        return None
    lines = source.splitlines()
    comments: dict[int, str] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT and span[0] - 50 <= token.start[0] <= span[1]:
                match = _INIT_COMMENT.match(token.string)
                if match:
                    comments[token.start[0]] = match.group(1)
    except (tokenize.TokenError, IndentationError):
        return None
    first, class_line = span
    for line in sorted(comments, reverse=True):
        above = line < first and all(
            lines[i - 1].strip().startswith("#") for i in range(line, first)
        )
        if first <= line <= class_line or above:
            where = f"the init comment on line {line}"
            try:
                return InitComment(parse_init(comments[line], where), line)
            except InitArgumentError as exc:
                raise InitArgumentError(str(exc), line) from None
    return None
