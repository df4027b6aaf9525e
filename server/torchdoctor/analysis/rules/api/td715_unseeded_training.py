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
    # every finding is at a loop around a backward() call (`backward_calls`: `x.backward()`
    # or `torch.autograd.backward`)
    spells=("backward",),
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
    header_end = loop.test if isinstance(loop, ast.While) else loop.iter
    span = ctx.doc.span_between(loop, header_end)
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
    body = sem.tree.body
    # asked first: most scripts run their code by calling a function or class they define
    # (`main()`, `Trainer(cfg).fit()`), found among the calls by name, each a climb of a few
    # steps to its top-level statement, where the walk below looks at every node of every
    # statement that is no definition. The last definitions first, met as the module's body is
    # read from the end: `main` is mostly last, and the statements before it are not read.
    calls_by_name = sem.calls_by_name
    defined: set[str] = set()
    for definition in reversed(body):
        # exact type tests: the parser makes no subclasses, and a union's isinstance costs more
        if type(definition) not in _DEFINITIONS:
            continue
        name: str = definition.name  # type: ignore[attr-defined]  # a definition: type() tested
        defined.add(name)
        for call in calls_by_name.get(name, ()):
            statement = sem.top_level_statement(call)
            if statement is not None and type(statement) not in _HOLDING_NO_USE:
                return True
    if not defined:
        return False
    # only whether some statement uses a name counts: the last ones first, where a script's
    # main guard or `main()` call stands
    for statement in reversed(body):
        if type(statement) in _HOLDING_NO_USE:
            continue  # a definition's own code, or an import (its names are no uses)
        for node in walk(statement):
            if type(node) is ast.Name and node.id in defined:
                return True
    return False


_DEFINITIONS = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
_HOLDING_NO_USE = _DEFINITIONS | {ast.Import, ast.ImportFrom}


def _seeds_torch(sem: Semantics) -> bool:
    # the keys' views are compared in C first: most files call none of them
    by_qualname = sem.calls_by_qualname
    if not SEEDING_CALLS.isdisjoint(by_qualname.keys()) and any(
        by_qualname.get(qualname) for qualname in SEEDING_CALLS
    ):
        return True
    # a helper (`set_seed(42)`, `seed_everything(...)`) is trusted to seed torch: the calls
    # are found by the name they call, from the file's indexes
    for calls in (sem.calls_by_attr, sem.calls_by_name):
        # one look in C over every name called: most files call no seed helper. A casefolded
        # "seed" is in the text wherever SEED_NAME matches (each character it matches folds
        # to one of "seed"'s), and costs a tenth of the case-blind search; ASCII names fold
        # as they lower, which costs half as much
        names = " ".join(calls)
        if "seed" not in (names.lower() if names.isascii() else names.casefold()):
            continue
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
    # the last import statement of the module's body: looked for from the end, by exact type
    for last_import in reversed(ctx.sem.tree.body):
        if type(last_import) in _IMPORTS:
            break
    else:
        return None
    if not ctx.statement_owns_lines(last_import):
        return None
    # the 0-based line it ends on, as `span_of` finds it: only that line is wanted, not the
    # columns a whole span converts
    end_line = (last_import.end_lineno or last_import.lineno) - 1
    line = f"{torch_root}.manual_seed(0)"
    if end_line + 1 < len(ctx.doc.index.lines):
        edit = Edit(Span(end_line + 1, 0, end_line + 1, 0), line + ctx.doc.line_break())
    else:
        end_col = len(ctx.doc.index.line(end_line))
        edit = Edit(Span(end_line, end_col, end_line, end_col), ctx.doc.line_break() + line)
    return Fix(f"Insert `{line}` after the imports", (edit,), safe=False)


_IMPORTS = frozenset({ast.Import, ast.ImportFrom})
