"""Where the top-level statements of a file begin, found by a light scan of its lines, and
found again after an edit by scanning only from the first changed line.

A file that does not parse is analysed block by block: each run of lines that holds whole
top-level statements is parsed alone, and a broken one is repaired or dropped without taking the
rest of the file with it. An editor needs the blocks of every version, so the scan keeps the
scanner's state at the start of each line: after an edit, the lines before it keep their state,
and the scan of the lines after it stops as soon as it meets an unchanged line in the state that
line had before. From there on the blocks are the old ones, moved by the change in line count.

A block starts at a line at column 0 outside any bracket or triple-quoted string, not after a
backslash that continues the line before, that is neither blank nor a comment, does not continue
the statement before (`else:`, `except:`, a closing bracket) and does not follow a decorator.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass

CONTINUATION_KEYWORDS = frozenset({"else", "elif", "except", "finally", "case"})
_WORD = re.compile(r"[A-Za-z_]+")


@dataclass(frozen=True, slots=True)
class ScanState:
    """What the scanner knows at the start of a line."""

    depth: int = 0  # open brackets
    in_string: str | None = None  # the quotes of an open triple-quoted string
    after_decorator: bool = False  # the last top-level line was a decorator
    continued: bool = False  # the line before ended with a backslash

    @property
    def at_top(self) -> bool:
        return self.depth == 0 and self.in_string is None and not self.continued


CLEAN = ScanState()


@dataclass(frozen=True)
class BlockScan:
    """The scan of one version of a file: the state at the start of each line (and after the
    last), and the first line of each block."""

    lines: tuple[str, ...]
    states: tuple[ScanState, ...]  # len(lines) + 1
    starts: tuple[int, ...]

    def blocks(self) -> list[tuple[int, int]]:
        """(first line, line after the last) of each block, covering every line."""
        ends = (*self.starts[1:], len(self.lines))
        return list(zip(self.starts, ends, strict=True))


def scan(lines: tuple[str, ...] | list[str]) -> BlockScan:
    lines = tuple(lines)
    states: list[ScanState] = [CLEAN]
    starts: list[int] = []
    state = CLEAN
    for number, line in enumerate(lines):
        starts_block, state = _step(line, state)
        if starts_block:
            starts.append(number)
        states.append(state)
    return BlockScan(lines, tuple(states), _with_first_line(starts))


def unchanged_ends(old: tuple[str, ...], new: tuple[str, ...]) -> tuple[int, int]:
    """How many lines two versions share at the start, and then at the end."""
    first = common_prefix(old, new)
    return first, common_suffix(old, new, min(len(old), len(new)) - first)


def rescan(
    previous: BlockScan, lines: tuple[str, ...], ends: tuple[int, int] | None = None
) -> BlockScan:
    """`scan(lines)`, reusing the scan of a previous version of the same file (`ends`: its
    `unchanged_ends`, when the caller has them already)."""
    old = previous.lines
    count, old_count = len(lines), len(old)
    # lines [count - same, count) equal the old lines [old_count - same, old_count)
    first, same = ends if ends is not None else unchanged_ends(old, lines)
    if first == count == old_count:
        return previous
    delta = count - old_count
    states = list(previous.states[: first + 1])
    old_starts = previous.starts
    starts = list(old_starts[: bisect_left(old_starts, first)])
    state = states[first]
    number = first
    while number < count:
        if number >= count - same and state == previous.states[number - delta]:
            # the rest of the file scans as it did before, moved by `delta` lines
            states.extend(previous.states[number - delta + 1 :])
            kept = old_starts[bisect_left(old_starts, number - delta) :]
            if kept and kept[0] == number - delta and not _step(lines[number], state)[0]:
                # the old first line's block start is only the one every file has at line 0
                kept = kept[1:]
            starts.extend(kept if not delta else (start + delta for start in kept))
            break
        starts_block, state = _step(lines[number], state)
        if starts_block:
            starts.append(number)
        states.append(state)
        number += 1
    return BlockScan(lines, tuple(states), _with_first_line(starts))


def common_prefix(old: tuple[str, ...], new: tuple[str, ...]) -> int:
    """How many lines the two versions share at the start. A binary search over slice
    comparisons, which run in C: an edit changes a line or two of thousands."""
    low, high = 0, min(len(old), len(new))
    while low < high:
        middle = (low + high + 1) // 2
        if old[low:middle] == new[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def common_suffix(old: tuple[str, ...], new: tuple[str, ...], limit: int) -> int:
    """How many lines (at most `limit`) the two versions share at the end."""
    low, high = 0, limit
    old_count, count = len(old), len(new)
    while low < high:
        middle = (low + high + 1) // 2
        if old[old_count - middle : old_count - low] == new[count - middle : count - low]:
            low = middle
        else:
            high = middle - 1
    return low


def _with_first_line(starts: list[int]) -> tuple[int, ...]:
    # the lines before the first statement (comments, blank lines) belong to the first block
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    return tuple(starts)


def _step(line: str, state: ScanState) -> tuple[bool, ScanState]:
    """Whether `line` starts a block, and the state at the start of the next line."""
    starts_block = False
    after_decorator = state.after_decorator
    # a line that starts with a backslash joins the next one, whose indentation counts
    if state.at_top and line and _at_column_zero(line) and not is_continuation(line):
        starts_block = not after_decorator
        after_decorator = line.startswith("@")
    depth, in_string = scan_brackets(line, state.depth, state.in_string)
    continued = in_string is None and _ends_with_backslash(line)
    if (
        depth == state.depth
        and in_string == state.in_string
        and after_decorator == state.after_decorator
        and continued == state.continued
    ):
        return starts_block, state  # most lines: no new state object
    return starts_block, ScanState(depth, in_string, after_decorator, continued)


def _at_column_zero(line: str) -> bool:
    """The line's first token stands at column 0 as Python's tokenizer counts it, and is no
    comment or backslash. A form feed in the leading whitespace sets the column back to 0: a
    line of a form feed alone is a page break, a form feed then four spaces indents as four
    spaces do, and a token right after a form feed stands at the top, whatever came before
    it. Only the whitespace after the last form feed counts."""
    first = line[0]
    if first not in " \t\f":
        return first not in "#\\"
    if "\f" not in line:
        return False  # indented: most lines
    rest = line.lstrip(" \t\f")
    leading = line[: len(line) - len(rest)]
    return bool(rest) and not leading.rpartition("\f")[2] and rest[0] not in "#\\"


def _ends_with_backslash(line: str) -> bool:
    if not line.endswith("\\"):
        return False
    # a comment ending in a backslash continues nothing; with quotes on the line the `#` may
    # be inside a string, and a continuation is the safer guess
    return "#" not in line or "'" in line or '"' in line


def is_continuation(stripped: str) -> bool:
    """A line that continues the statement before it rather than starting one."""
    stripped = stripped.lstrip()
    if not stripped:
        return False
    if stripped[0] in ")]}":
        return True
    word = _WORD.match(stripped)
    return word is not None and word.group() in CONTINUATION_KEYWORDS


def scan_brackets(line: str, depth: int, in_string: str | None) -> tuple[int, str | None]:
    """Track bracket depth and open triple-quoted strings across a line (a light tokenizer)."""
    # a line with no quote, bracket or comment changes nothing (most continuation lines)
    if in_string is None and not _INTERESTING.search(line):
        return depth, in_string
    position = 0
    length = len(line)
    while position < length:
        char = line[position]
        if in_string is not None:
            if char == "\\":
                position += 2
                continue
            if line.startswith(in_string, position):
                position += len(in_string)
                in_string = None
                continue
            position += 1
            continue
        if char == "#":
            break
        if char in "\"'":
            triple = char * 3
            if line.startswith(triple, position):
                in_string = triple
                position += 3
                continue
            position = _end_of_single_quoted(line, position + 1, char)
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        position += 1
    return depth, in_string


_INTERESTING = re.compile(r"[\"'#()\[\]{}]")


def _end_of_single_quoted(line: str, position: int, quote: str) -> int:
    while position < len(line):
        if line[position] == "\\":
            position += 2
            continue
        if line[position] == quote:
            return position + 1
        position += 1
    return len(line)
