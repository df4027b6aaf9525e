"""Successive versions of one document, analysed again only where an edit changed them.

A keystroke changes one top-level statement of a file. `IncrementalAnalyser` keeps, for each
top-level block of the last version (see blocks.py), its statements, its syntax problems, the
index the semantics is merged from, and the findings located in it. For the next version it
scans the lines again from the first changed one, parses only the blocks whose text is new
(a block that does not parse is repaired alone, so a syntax error costs nothing outside its
block), merges the semantics from the blocks' indexes, and runs the rules only on the blocks that
changed (scoped.py), reusing the other blocks' findings moved by the change in line count.

The result is what `analyse(Document.parse(text))` gives. Where the reuse cannot be shown to give
it, the version is analysed whole: NUL characters, `from __future__ import barry_as_FLUFL`
(which changes how `<>` parses), and a first version whose statements do not fall into the
scanner's blocks.
"""

from __future__ import annotations

import ast
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from itertools import chain

from .blocks import BlockScan, rescan, scan, unchanged_ends
from .config import Config
from .document import Document, SyntaxProblem, _parse_block, _try_parse
from .engine import analyse
from .findings import Finding
from .gc_pause import gc_paused
from .lines import LineIndex
from .scoped import BlockFindings, ScopedFindings, analyse_scoped
from .semantics import BlockIndex, Semantics, index_block, merge_blocks
from .tree_walk import shift_lines


@dataclass(eq=False)
class ParsedBlock:
    """One top-level block of a version: its text (the key it is found again by), where it
    stands, what parsing it gave, and what was derived from that."""

    text: str
    start: int  # 0-based first line in the version it was last placed in
    end: int  # the line after its last
    statements: list[ast.stmt]
    problems: list[SyntaxProblem]
    _index: BlockIndex | None = field(default=None, repr=False)
    # what the analysis of the file found in it, and what it tells the rest of the file
    kept: BlockFindings | None = field(default=None, repr=False)
    interface: object = field(default=None, repr=False)
    # cut from a whole parse of the file rather than parsed alone: the same statements unless
    # the block ends in a way only the next line completes (a backslash before a blank line)
    alone: bool = True

    @property
    def index(self) -> BlockIndex:
        if self._index is None:
            self._index = index_block(self.statements)
        return self._index

    def move_to(self, start: int) -> None:
        """Put the block at another first line: its nodes move by whole lines."""
        delta = start - self.start
        if delta:
            # the index lists every node of the block below its statements: no walk needed
            # (a block of the previous version was indexed when that version was merged)
            shift_lines(chain(self.statements, self.index.parents), delta)
            self.problems = [
                SyntaxProblem(problem.line + delta, problem.col, problem.message)
                for problem in self.problems
            ]
            self.start += delta
            self.end += delta


@dataclass
class Version:
    """What the analyser keeps of the last version it parsed."""

    document: Document
    scan: BlockScan
    blocks: list[ParsedBlock]


class IncrementalAnalyser:
    """Parses and analyses the versions of one document in turn. Not thread-safe: a document is
    analysed by one thread at a time (the language server never runs two analyses of one
    document at once). The nodes of blocks that an edit moved are moved in place: a document
    of an earlier version must not be read once a later one has been parsed."""

    def __init__(self, path: str = "<unknown>") -> None:
        self.path = path
        self._previous: Version | None = None
        self._findings = ScopedFindings()

    def parse(self, text: str, path: str | None = None) -> Document:
        """The document for `text`, equal to `Document.parse(text, path)` (the analyser's own
        path when none is given: a renamed file keeps its parse)."""
        path = self.path if path is None else path
        with gc_paused(freeze=True):
            version = self._parse(text, path)
        self._previous = version
        return version.document if version is not None else Document.parse(text, path)

    def blocks(self) -> list[ParsedBlock] | None:
        """The blocks of the last version parsed, or None when it was parsed whole."""
        return None if self._previous is None else self._previous.blocks

    def analyse(
        self, text: str, config: Config | None = None, path: str | None = None
    ) -> tuple[Document, list[Finding]]:
        """The document for `text` and its findings, equal to those of a fresh analysis."""
        config = config or Config()
        with gc_paused(freeze=True):
            path = self.path if path is None else path
            version = self._parse(text, path)
            self._previous = version
            if version is None:
                self._findings.forget()
                document = Document.parse(text, path)
                return document, analyse(document, config)
            return version.document, analyse_scoped(
                version.document, version.blocks, config, self._findings
            )

    def forget(self) -> None:
        self._previous = None
        self._findings.forget()

    @property
    def moved_from(self) -> dict[int, tuple[Finding, int]]:
        """The last analysis' findings that are the previous one's moved by whole lines (an
        Enter above them), by id: the finding they were, and the lines they moved by."""
        return self._findings.moved_from

    @property
    def runs(self) -> tuple[int, int]:
        """(whole-file runs, focused runs) of the rules so far: what an edit cost."""
        return self._findings.full_runs, self._findings.focused_runs

    # ---- parsing -----------------------------------------------------------------------------
    def _parse(self, text: str, path: str) -> Version | None:
        if "\0" in text or "barry_as_FLUFL" in text:
            return None
        index = LineIndex.of(text)
        previous = self._previous
        if previous is None:
            return _first_version(text, path, index)
        if text == previous.document.text and path == previous.document.path:
            return previous
        lines = index.lines
        ends = unchanged_ends(previous.scan.lines, lines)
        block_scan = rescan(previous.scan, lines, ends)
        blocks = _blocks_around_edit(previous, block_scan, ends)
        if blocks is None:
            blocks = _blocks_matched(previous, block_scan, ends)
        if any(block.problems for block in blocks):
            # the file is broken: what a fresh parse makes of it is each block parsed alone
            for position, block in enumerate(blocks):
                if not block.alone:
                    blocks[position] = _parse_new_block(lines, block.start, block.end, block.text)
        if _may_be_split_wrongly(blocks, lines):
            # the scanner may have cut a statement: let a whole parse decide, and start over
            return _first_version(text, path, index)
        return _version(text, path, index, block_scan, blocks, previous.document.semantics)


def _blocks_around_edit(
    previous: Version, block_scan: BlockScan, ends: tuple[int, int]
) -> list[ParsedBlock] | None:
    """The blocks of the new version: the previous version's before the first changed line and
    after the last (moved by the change in line count), and the ones between found again or
    parsed. None when the blocks at the ends do not line up with the old ones (the scanner
    cut them otherwise: `_blocks_matched` sorts it out)."""
    lines = block_scan.lines
    old_blocks = previous.blocks
    bounds = (*block_scan.starts, len(lines))
    old_bounds = (*previous.scan.starts, len(previous.scan.lines))
    if len(old_bounds) != len(old_blocks) + 1:
        return None
    first, same = ends
    delta = len(lines) - len(previous.scan.lines)
    # the blocks wholly before the first changed line: their bounds are the old ones
    prefix = bisect_right(bounds, first) - 1
    if bounds[: prefix + 1] != old_bounds[: prefix + 1]:
        return None
    # the blocks wholly in the lines left alone at the end, and where they were
    suffix = max(bisect_left(bounds, len(lines) - same), prefix)
    old_suffix = suffix + len(old_bounds) - len(bounds)
    if old_suffix < prefix:
        return None
    kept_bounds = old_bounds[old_suffix:]
    if delta:
        kept_bounds = tuple(bound + delta for bound in kept_bounds)
    if bounds[suffix:] != kept_bounds:
        return None
    available: dict[str, list[ParsedBlock]] = {}
    for block in old_blocks[prefix:old_suffix]:
        available.setdefault(block.text, []).append(block)
    middle = [
        _reuse_or_parse(available, lines, bounds[place], bounds[place + 1])
        for place in range(prefix, suffix)
    ]
    after = old_blocks[old_suffix:]
    if delta:
        for place, block in enumerate(after):
            if block.problems:
                # a syntax error's message may name a line: parsed again where it now stands
                after[place] = _parse_new_block(
                    lines, block.start + delta, block.end + delta, block.text
                )
            else:
                block.move_to(block.start + delta)
    return old_blocks[:prefix] + middle + after


def _blocks_matched(
    previous: Version, block_scan: BlockScan, ends: tuple[int, int]
) -> list[ParsedBlock]:
    """The blocks of the new version, each matched with an old block by its place at the
    unchanged ends or by its text."""
    lines = block_scan.lines
    available: dict[str, list[ParsedBlock]] = {}
    for block in previous.blocks:
        available.setdefault(block.text, []).append(block)
    unchanged = _UnchangedEnds(ends, len(previous.scan.lines), len(lines), previous.blocks)
    blocks: list[ParsedBlock] = []
    for start, end in block_scan.blocks():
        same = unchanged.block(start, end)
        if same is not None and _take(available, same, start):
            blocks.append(same)
        else:
            blocks.append(_reuse_or_parse(available, lines, start, end))
    return blocks


class _UnchangedEnds:
    """The lines an edit left alone at the start and at the end of the file: a block that lies
    wholly in them is the old block of those lines, found without joining its text."""

    def __init__(
        self, ends: tuple[int, int], old_count: int, count: int, blocks: list[ParsedBlock]
    ) -> None:
        first, same = ends
        self.first = first  # lines [0, first) are the old ones
        self.tail = count - same  # lines [tail, count) are the old ones, moved by delta
        self.delta = count - old_count
        self.by_range = {(block.start, block.end): block for block in blocks}

    def block(self, start: int, end: int) -> ParsedBlock | None:
        if end <= self.first:
            return self.by_range.get((start, end))
        if start >= self.tail:
            return self.by_range.get((start - self.delta, end - self.delta))
        return None


def _take(available: dict[str, list[ParsedBlock]], block: ParsedBlock, start: int) -> bool:
    """Reuse `block` at `start` unless a block before took it, or it is broken and would move:
    a syntax error's message may name a line ("after 'for' statement on line 9"), so a broken
    block is parsed again where it now stands."""
    candidates = available.get(block.text)
    if not candidates or block not in candidates:
        return False
    if block.start != start and block.problems:
        return False
    candidates.remove(block)
    block.move_to(start)
    return True


def _reuse_or_parse(
    available: dict[str, list[ParsedBlock]], lines: tuple[str, ...], start: int, end: int
) -> ParsedBlock:
    text = "\n".join(lines[start:end])
    candidates = available.get(text)
    if candidates:
        # the same block at the same place first: nothing to move
        chosen = next((block for block in candidates if block.start == start), candidates[0])
        if _take(available, chosen, start):
            return chosen
    return _parse_new_block(lines, start, end, text)


def _may_be_split_wrongly(blocks: list[ParsedBlock], lines: tuple[str, ...]) -> bool:
    """A block that does not parse alone but does with the block after it: the scanner's
    light tokenizer and Python's disagree about where a statement ends (a backslash before a
    blank line, a string it misread), and the file may well parse whole. Checked where a
    broken block is checked in every version: the block after it may have changed."""
    for position, block in enumerate(blocks[:-1]):
        if not block.problems:
            continue
        following = blocks[position + 1]
        source = "\n" * block.start + "\n".join(lines[block.start : following.end])
        if _try_parse(source) is not None:
            return True
    return False


def _parse_new_block(lines: tuple[str, ...], start: int, end: int, text: str) -> ParsedBlock:
    # leading newlines put every node at its real line number without renumbering
    tree = _try_parse("\n" * start + text)
    if tree is not None:
        return ParsedBlock(text, start, end, tree.body, [])
    problems: list[SyntaxProblem] = []
    statements = _parse_block(list(lines), start, end, problems)
    return ParsedBlock(text, start, end, statements, problems)


def _first_version(text: str, path: str, index: LineIndex) -> Version | None:
    """A fresh parse, cut into the scanner's blocks; None when its statements do not fall
    into them (then no block may be reused)."""
    document = Document.parse(text, path)
    block_scan = scan(index.lines)
    ranges = block_scan.blocks()
    statements = document.tree.body
    blocks: list[ParsedBlock] = []
    position = 0
    for start, end in ranges:
        members: list[ast.stmt] = []
        while position < len(statements) and _first_line(statements[position]) < end:
            statement = statements[position]
            if _first_line(statement) < start or (statement.end_lineno or 0) > end:
                return None  # a statement across two blocks: the scan does not fit this parse
            members.append(statement)
            position += 1
        problems = [p for p in document.syntax_problems if start <= p.line < end]
        block = ParsedBlock("\n".join(index.lines[start:end]), start, end, members, problems)
        block.alone = not document.parsed_whole
        blocks.append(block)
    if position != len(statements) or len([p for b in blocks for p in b.problems]) != len(
        document.syntax_problems
    ):
        return None
    document._semantics = merge_blocks(document.tree, [block.index for block in blocks])
    return Version(document, block_scan, blocks)


def _version(
    text: str,
    path: str,
    index: LineIndex,
    block_scan: BlockScan,
    blocks: list[ParsedBlock],
    previous: Semantics,
) -> Version:
    body = [statement for block in blocks for statement in block.statements]
    problems = [problem for block in blocks for problem in block.problems]
    tree = ast.Module(body=body, type_ignores=[])
    document = Document(text, path, index, tree, problems, not problems)
    document._semantics = merge_blocks(tree, [block.index for block in blocks], previous)
    return Version(document, block_scan, blocks)


def _first_line(statement: ast.stmt) -> int:
    """A statement's first line, 0-based, counting its decorators."""
    line = statement.lineno
    for decorator in getattr(statement, "decorator_list", ()):
        line = min(line, decorator.lineno)
    return line - 1
