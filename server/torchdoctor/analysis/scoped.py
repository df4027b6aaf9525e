"""Findings by top-level block: after an edit the rules run only on the blocks it changed.

The findings located in a block depend on its own text and on what the rest of the file says
that rules read: the imports, the kinds of names, the file's model classes, and each other
block's *interface* — for a function its header and its summary (does it back-propagate, step,
zero or rescale gradients, switch modes, run without autograd, return a graph); for a class its
header, its class-level statements, its methods' headers and summaries, the mode-dependent
layers it builds and what it assigns to `self`; for any other top-level code its whole text.
These make the file's key. While the key stays, a block whose text did not change keeps its
findings, moved by the lines the edit added or removed above it; the changed blocks are
analysed again with the rules focused on their nodes (see `Semantics.focused_on`). When the
key changes, every block is analysed again.

A focused run that reports outside the blocks it was focused on has found a finding that one
block causes in another: that version is analysed whole instead. A finding whose fix edits
another block is not kept for the next version: the other block may change under it.
"""

from __future__ import annotations

import ast
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .config import Config
from .context import RuleContext
from .document import Document
from .engine import run_rules
from .file_facts import file_facts_of
from .findings import Edit, Finding, Fix, Span
from .mode_layers import class_mode_layers
from .semantics import Semantics, ValueKind, position
from .summaries import FunctionSummary, returned_names, summaries_of

if TYPE_CHECKING:
    from .incremental import ParsedBlock

# Rules that read more of the file than the key above holds run on the whole file every time.
# Each reports where one block is but on a fact of the whole file: TD000 (the syntax
# problems of every block), TD505 (module-level code that starts loader workers, and
# whether the file guards it), TD504 and TD604 (a loader that
# a training loop somewhere uses; the file runs distributed), TD603 (the file runs
# distributed), TD715 (the file trains but never seeds torch).
# The API rules report an imported name at its import or at its uses, whichever the whole
# file calls for: TD703, TD704, TD707, TD708, TD711, TD712, TD714.
FILE_RULES: frozenset[str] = frozenset(
    {"TD000", "TD504", "TD505", "TD603", "TD604", "TD715"}
    | {"TD703", "TD704", "TD707", "TD708", "TD711", "TD712", "TD714"}
)


@dataclass
class BlockFindings:
    """The findings located in one block, as they were when the block started at `start`,
    under the file key they were found with."""

    key: object
    start: int
    findings: list[Finding]
    # a fix edits another block, which may change under it: found again next time
    volatile: bool = False


@dataclass
class ScopedFindings:
    """What one document's analyser keeps between versions (the blocks keep the rest)."""

    key: object = None
    kinds: dict[str, ValueKind] | None = None  # the kinds of names the last version had
    full_runs: int = 0
    focused_runs: int = 0
    # the last version's findings that are an earlier version's moved by whole lines, by id:
    # (that earlier finding, the lines it moved by); what showed it can be moved, not redone
    moved_from: dict[int, tuple[Finding, int]] = field(default_factory=dict)

    def forget(self) -> None:
        self.key = None
        self.kinds = None
        self.moved_from = {}


def analyse_scoped(
    document: Document, blocks: list[ParsedBlock], config: Config, cache: ScopedFindings
) -> list[Finding]:
    """The findings of `run_rules(document, config)`, reusing those of unchanged blocks."""
    sem = document.semantics
    # A name whose kind changed (`criterion = nn.MSELoss()` renamed) matters where it is
    # mentioned: those blocks are analysed again, and their interfaces found again.
    kinds = sem.kinds  # the previous version's own dict while no kind changed
    changed = set() if kinds is cache.kinds else _changed_names(cache.kinds, kinds)
    cache.kinds = kinds
    if changed is None:
        for block in blocks:
            block.interface = None
    elif changed:
        for block in blocks:
            if not changed.isdisjoint(block.index.identifiers):
                block.interface = None
                block.kept = None
    key = _file_key(document, blocks, config, sem)
    if key == cache.key:
        key = cache.key  # the same object: each block's comparison below is one identity check
    elif cache.key is not None:
        # A changed key analyses the whole file, and the key kept for the next edit must hold
        # what every block says now: an interface kept from an older version (found under
        # other imports, or other helpers' summaries) could equal, by chance, a changed
        # block's new one, and that change would go unseen.
        for block in blocks:
            block.interface = None
        key = _file_key(document, blocks, config, sem)
    cache.key = key
    dirty = [block for block in blocks if block.kept is None or block.kept.key is not key]
    if dirty and len(dirty) < len(blocks):
        focus = [block.index for block in dirty]
        produced = run_rules(document, config, focus=focus, exclude=FILE_RULES)
        if _all_inside(produced, dirty):
            _store(produced, dirty, key)
            cache.focused_runs += 1
        else:
            dirty = list(blocks)
    if len(dirty) == len(blocks):
        _store(run_rules(document, config, exclude=FILE_RULES), blocks, key)
        cache.full_runs += 1
    findings: list[Finding] = []
    moved_from: dict[int, tuple[Finding, int]] = {}
    for block in blocks:
        kept = block.kept
        assert kept is not None
        delta = block.start - kept.start
        if delta:
            moved = [_moved(finding, delta) for finding in kept.findings]
            for before, after in zip(kept.findings, moved, strict=True):
                moved_from[id(after)] = (before, delta)
        else:
            moved = kept.findings
        findings.extend(moved)
        if kept.volatile:
            block.kept = None
        elif delta:
            block.kept = BlockFindings(key, block.start, moved)
    # the blocks' findings are in order (each block's are, and lie in its lines): the file
    # rules' few go in where they belong, after any equal ones, as a stable sort puts them
    for finding in run_rules(document, config, codes=FILE_RULES):
        findings.insert(bisect_right(findings, _order(finding), key=_order), finding)
    cache.moved_from = moved_from
    return findings


def _order(finding: Finding) -> tuple[int, int, str]:
    return (finding.span.start_line, finding.span.start_col, finding.code)


def _store(findings: list[Finding], blocks: list[ParsedBlock], key: object) -> None:
    starts = [block.start for block in blocks]
    grouped: list[list[Finding]] = [[] for _ in blocks]
    for finding in findings:
        grouped[max(0, bisect_right(starts, finding.span.start_line) - 1)].append(finding)
    for block, found in zip(blocks, grouped, strict=True):
        volatile = any(_edits_outside(finding, block) for finding in found)
        block.kept = BlockFindings(key, block.start, found, volatile)


def _all_inside(findings: list[Finding], blocks: list[ParsedBlock]) -> bool:
    ranges = [(block.start, block.end) for block in blocks]
    return all(
        any(start <= finding.span.start_line < end for start, end in ranges) for finding in findings
    )


def _edits_outside(finding: Finding, block: ParsedBlock) -> bool:
    if finding.fix is None:
        return False
    return any(
        not (block.start <= edit.span.start_line and edit.span.end_line <= block.end)
        for edit in finding.fix.edits
    )


def _moved(finding: Finding, delta: int) -> Finding:
    # made field by field: `dataclasses.replace` looks the fields up again for each of the
    # hundreds of findings an Enter keystroke moves
    fix = finding.fix
    if fix is not None:
        edits = tuple(Edit(_span_moved(edit.span, delta), edit.content) for edit in fix.edits)
        fix = Fix(fix.title, edits, fix.safe)
    return Finding(
        finding.code,
        finding.name,
        finding.message,
        _span_moved(finding.span, delta),
        finding.severity,
        fix,
    )


def _span_moved(span: Span, delta: int) -> Span:
    return Span(span.start_line + delta, span.start_col, span.end_line + delta, span.end_col)


# ---- the file's key ---------------------------------------------------------------------------
def _file_key(
    document: Document,
    blocks: list[ParsedBlock],
    config: Config,
    sem: Semantics,
) -> object:
    interfaces = []
    for block in blocks:
        if block.interface is None:
            block.interface = _interface(block, sem)
        interfaces.append(block.interface)
    return (
        config,
        document.path,
        tuple(sem.imports.items()),
        tuple(sem.module_classes),
        file_facts_of(RuleContext(document, sem, config)),
        tuple(interfaces),
    )


def _changed_names(
    before: dict[str, ValueKind] | None, after: dict[str, ValueKind]
) -> set[str] | None:
    """The last parts of the dotted names whose kind changed; None when all may have."""
    if before is None:
        return None
    changed = {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}
    return {name.rsplit(".", 1)[-1] for name in changed}


def _interface(block: ParsedBlock, sem: Semantics) -> object:
    statements = block.statements
    if len(statements) == 1 and isinstance(
        statements[0], ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    ):
        definition = statements[0]
        summaries = summaries_of(sem)
        functions = tuple(
            (
                function.name,
                _header(function),
                _summary_facts(summaries.of(function)),
                tuple(sorted(returned_names(sem, function))),
                tuple(_mode_calls(sem, block, function)),
            )
            for function in block.index.functions
        )
        # the file's functions it calls: a caller's loop makes a helper's findings
        local_calls = tuple(
            sorted(
                {
                    called.name
                    for call in block.index.calls
                    if (called := summaries.resolved.get(id(call))) is not None
                }
            )
        )
        classes = tuple(
            (_class_skeleton(cls), tuple(class_mode_layers(sem, cls)))
            for cls in block.index.classes
        )
        assigned = tuple(
            (ast.dump(target), ast.dump(assign.value))
            for assign in block.index.assigns
            if not isinstance(assign, ast.AugAssign) and assign.value is not None
            for target in (assign.targets if isinstance(assign, ast.Assign) else [assign.target])
            if _is_attribute_target(target)
        )
        kind = type(definition).__name__
        return (kind, definition.name, functions, classes, assigned, local_calls)
    # top-level code tells the rest of the file what it does, not where: its structure without
    # positions, so a line break or a comment in it re-analyses that block alone
    return ("code", tuple(ast.dump(statement) for statement in statements))


def _mode_calls(sem: Semantics, block: ParsedBlock, function: ast.AST) -> Iterator[str]:
    """The `.train()`/`.eval()` calls of a function's own body, in order: the mode a helper
    leaves a model in is what a caller's loop finds (TD403), which its summary's "switches
    modes" does not say."""
    calls = [
        call
        for name in ("train", "eval")
        for call in block.index.calls_by_attr.get(name, ())
        if sem.enclosing_function(call) is function
    ]
    calls.sort(key=position)
    for call in calls:
        yield ast.dump(call)  # without positions: a line added above changes nothing


def _header(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """Decorators, parameters and return annotation, without positions."""
    parts: list[ast.AST] = [*function.decorator_list, function.args]
    if function.returns is not None:
        parts.append(function.returns)
    return "|".join(ast.dump(part) for part in parts)


def _class_skeleton(cls: ast.ClassDef) -> str:
    parts = [ast.dump(part) for part in (*cls.decorator_list, *cls.bases, *cls.keywords)]
    for statement in cls.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            parts.append(f"def {statement.name}")
        elif not isinstance(statement, ast.ClassDef):
            parts.append(ast.dump(statement))
    return "|".join(parts)


def _summary_facts(summary: FunctionSummary | None) -> object:
    if summary is None:
        return None
    return (
        tuple(sorted(summary.backward_parameters)),
        summary.calls_backward,
        summary.steps_optimizer,
        summary.zeroes_gradients,
        summary.rescales_gradients,
        summary.switches_mode,
        summary.runs_without_grad,
        summary.wraps_in_no_grad,
    )


def _is_attribute_target(target: ast.AST) -> bool:
    return isinstance(target, ast.Attribute)
