"""IPython syntax in notebook cells (`%timeit`, `%%time`, `!pip`, `x = !ls`, `obj?`): replaced
by plain Python of the same line count, so the cell parses and every other line keeps its
text, line and columns exactly."""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass
from functools import lru_cache

from .lines import LINE_BREAK

# Cell magics whose body is Python that runs in the notebook: the body is analysed. The body
# of any other cell magic (%%bash, %%writefile, %%html, %%javascript...) is not Python run by
# the kernel, and the whole cell is left out.
PYTHON_BODY_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "memit"})
CELL_MAGIC = re.compile(r"\s*%%(\w+)")
# `files = !ls`, `t = %timeit -o f()`: the target stays assigned, the command goes
ASSIGNED_ESCAPE = re.compile(r"(\s*)([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)\s*=\s*[!%]")
# `obj?`, `obj.attr??`, `?obj`: help requests
HELP = re.compile(r"\s*(?:\?+\s*[\w.]+|[\w.]+\s*\?{1,2})\s*$")


@dataclass(frozen=True)
class PythonCell:
    text: str  # the cell as Python: as many lines as the source, magic lines replaced
    neutral_lines: frozenset[int]  # 0-based lines that were replaced: not the user's Python
    parses: bool  # whether `text` is valid Python


@lru_cache(maxsize=1024)  # the editor re-joins every cell on each keystroke in one of them
def as_python(source: str) -> PythonCell:
    """The cell's source as Python. A cell that parses as it is holds no IPython syntax."""
    if _parses(source):
        return PythonCell(source, frozenset(), True)
    parts = LINE_BREAK.split(source)
    breaks = LINE_BREAK.findall(source) + [""]
    neutral: set[int] = set()
    first = next((n for n, line in enumerate(parts) if line.strip()), None)
    magic = CELL_MAGIC.match(parts[first]) if first is not None else None
    if magic is not None and first is not None:
        if magic.group(1) not in PYTHON_BODY_CELL_MAGICS:
            blank = "".join(breaks)  # every line empty, the line breaks kept
            lines = len(parts) - (parts[-1] == "")  # a final line break ends the last line
            return PythonCell(blank, frozenset(range(lines)), True)
        parts[first] = ""
        neutral.add(first)
    for number, line in enumerate(parts):
        if number in neutral:
            continue
        replacement = _line_as_python(line)
        if replacement is not None:
            parts[number] = replacement
            neutral.add(number)
    text = "".join(part + end for part, end in zip(parts, breaks, strict=True))
    return PythonCell(text, frozenset(neutral), _parses(text))


def _line_as_python(line: str) -> str | None:
    stripped = line.lstrip()
    indent = line[: len(line) - len(stripped)]
    if stripped.startswith(("%", "!")) or HELP.match(line):
        return f"{indent}pass"
    assigned = ASSIGNED_ESCAPE.match(line)
    if assigned is not None:
        return f"{assigned.group(1)}{assigned.group(2)} = None"
    return None


def _parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like: not our findings
            ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True
