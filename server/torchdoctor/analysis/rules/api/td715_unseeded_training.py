"""TD715 unseeded-training: A training script that never seeds torch: runs cannot be reproduced."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ...context import RuleContext
from ...findings import Edit, Finding, Fix, Severity, Span, rule
from ...semantics import Semantics
from ...training import training_of
from ...tree_walk import walk

SEEDING_CALLS = frozenset(
    {
        "torch.manual_seed",
        "torch.random.manual_seed",
        "torch.cuda.manual_seed",
        "torch.cuda.manual_seed_all",
        "torch.mps.manual_seed",
        "torch.xpu.manual_seed",
        "torch.xpu.manual_seed_all",
    }
)
# Calls with "seed" in their name that do not seed torch's generator.
NOT_SEEDING_CALLS = frozenset(
    {
        "random.seed",
        "numpy.random.seed",
        "numpy.random.default_rng",
        "numpy.random.RandomState",
        "torch.seed",
        "torch.initial_seed",
        "torch.random.seed",
        "torch.random.initial_seed",
        "torch.cuda.seed",
        "torch.cuda.seed_all",
        "torch.cuda.initial_seed",
    }
)


@rule(
    "TD715",
    "unseeded-training",
    Severity.INFORMATION,
    "A training script that never seeds torch: runs cannot be reproduced.",
    fixable=True,
    enabled_by_default=False,
)
def unseeded_training(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    torch_root = sem.name_bound_to("torch", plain_first=True)
    if torch_root is None and not any(t.startswith("torch.") for t in sem.imports.values()):
        return
    loop = _first_training_loop(sem)
    if loop is None or _seeds_torch(sem):
        return
    if sem.enclosing_function(loop) is not None and not _top_level_runs_own_code(sem):
        return  # a library of training code: seeding is the job of the program that runs it
    header_end = loop.iter if isinstance(loop, ast.For | ast.AsyncFor) else loop.test
    start = ctx.doc.span_of(loop)
    end = ctx.doc.span_of(header_end)
    span = Span(start.start_line, start.start_col, end.end_line, end.end_col)
    message = (
        "this file trains a model but never seeds torch (`torch.manual_seed`): weight "
        "initialisation, dropout and shuffling differ on every run, so results cannot be "
        "reproduced"
    )
    yield ctx.finding("TD715", span, message, _seed_fix(ctx, torch_root))


def _first_training_loop(sem: Semantics) -> ast.For | ast.AsyncFor | ast.While | None:
    structure = training_of(sem)
    first = structure.first_training_loop()
    if first is not None:
        return first
    for call in structure.backward_calls:
        loops = sem.enclosing_loops(call)
        if loops:
            return loops[0]
    return None


def _top_level_runs_own_code(sem: Semantics) -> bool:
    """Whether the file's top-level code (a main guard included) calls or hands on a function
    or class the file defines: `main()`, `Trainer(cfg).fit()`, `fire.Fire(train)`."""
    defined = {
        statement.name
        for statement in sem.tree.body
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    if not defined:
        return False
    for statement in sem.tree.body:
        if isinstance(statement, _HOLDING_NO_USE):
            continue  # a definition's own code, or an import (its names are no uses)
        for node in walk(statement):
            if isinstance(node, ast.Name) and node.id in defined:
                return True
    return False


_HOLDING_NO_USE = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)


def _seeds_torch(sem: Semantics) -> bool:
    if any(True for _ in sem.calls_to(*SEEDING_CALLS)):
        return True
    # a helper (`set_seed(42)`, `seed_everything(...)`) is trusted to seed torch: the calls
    # are found by the name they call, from the file's indexes
    for calls in (sem.calls_by_attr, sem.calls_by_name):
        if SEED_NAME.search(" ".join(calls)) is None:
            continue  # one search in C over every name called: most files call no seed helper
        for name in calls:
            if SEED_NAME.search(name) is None:
                continue
            if any(sem.call_qualname(call) not in NOT_SEEDING_CALLS for call in calls[name]):
                return True
    return False


SEED_NAME = re.compile("seed", re.IGNORECASE)


def _seed_fix(ctx: RuleContext, torch_root: str | None) -> Fix | None:
    if torch_root is None:
        return None
    imports = [
        statement
        for statement in ctx.sem.tree.body
        if isinstance(statement, ast.Import | ast.ImportFrom)
    ]
    if not imports or not ctx.statement_owns_lines(imports[-1]):
        return None
    last = ctx.doc.span_of(imports[-1])
    line = f"{torch_root}.manual_seed(0)"
    if last.end_line + 1 < len(ctx.doc.index.lines):
        edit = Edit(Span(last.end_line + 1, 0, last.end_line + 1, 0), line + ctx.doc.line_break())
    else:
        end_col = len(ctx.doc.index.line(last.end_line))
        edit = Edit(
            Span(last.end_line, end_col, last.end_line, end_col), ctx.doc.line_break() + line
        )
    return Fix(f"Insert `{line}` after the imports", (edit,), safe=False)
