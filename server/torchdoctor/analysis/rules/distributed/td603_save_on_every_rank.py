"""TD603 save-on-every-rank: torch.save in a distributed script without a rank-0 guard: every
rank writes the file."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ...bindings import (
    at_module_level,
    calls_by_name,
    class_of_instance,
    enclosing_class,
    methods_of,
    module_functions,
)
from ...context import RuleContext
from ...expressions import last_name
from ...findings import Edit, Finding, Fix, Severity, Span, called_names, rule
from ...indentation import indent_lines, indent_unit
from ...parallel_wrappers import DDP_CLASSES
from ...semantics import Function, Semantics
from ...training import statement_list_of
from ...tree_walk import walk
from ._shared import mentions_rank

SAVE_FUNCTIONS = ("torch.save", "torch.serialization.save")
# Names that say "this is the process that writes": is_main_process(), master_process,
# accelerator.is_main_process, trainer.is_global_zero, @rank_zero_only, is_rank_zero() ...
MAIN_PROCESS_NAME = re.compile(
    r"^(is_)?(local_)?(main|master|chief|leader)(_process|_proc|_rank|_node|_worker|_ordinal|_only)?$"
    r"|^is_(local_)?main_process$|^is_(global|local)_zero$|^(is_)?(global_)?rank_?(0|zero)(_only)?$"
    r"|^is_(local_)?(root|primary)(_process|_worker|_rank|_node)?$",
    re.IGNORECASE,
)
SAVE_HELPER_NAME = re.compile(r"master|main_process|rank_?0|rank_?zero|on_main", re.IGNORECASE)
EXIT_CALLS = frozenset({"exit", "quit", "_exit"})
# Calls that start worker processes running the function they are given: `mp.spawn(main, ...)`,
# `Process(target=run)`, `notebook_launcher(train)`. A function handed to anything else (a
# display helper, a timer) runs in the process that calls it.
LAUNCHERS = frozenset(
    {"spawn", "start_processes", "Process", "elastic_launch", "notebook_launcher", "launch"}
)
# Words of tests that hold whenever the run is distributed at all
DISTRIBUTED_STATE_WORDS = ("distributed", "is_initialized", "dist_avail", "world_size", "ddp")
MAX_HELPER_DEPTH = 2  # rank-0 helpers followed through helpers, at most


def is_distributed_script(sem: Semantics) -> bool:
    """The file starts or uses a process group, or wraps a model for data parallelism."""
    cached = sem.derived.get("distributed:script")
    if cached is None:
        cached = any(
            name.startswith("torch.distributed.") or name in DDP_CLASSES
            for name in sem.calls_by_qualname
        )
        sem.derived["distributed:script"] = cached
    return cached


@rule(
    "TD603",
    "save-on-every-rank",
    Severity.WARNING,
    "torch.save in a distributed script without a rank-0 guard: every rank writes the file.",
    fixable=True,
    spells=called_names(*SAVE_FUNCTIONS),
)
def save_on_every_rank(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    saves = sem.calls_to(*SAVE_FUNCTIONS)
    if not saves or not is_distributed_script(sem):
        return
    guards = _RankGuards(sem)
    for save in saves:
        if _per_rank_file(save) or not guards.reached_on_every_rank(save):
            continue
        message = (
            "every process of a distributed run executes this `torch.save`: all ranks write "
            "the same file at the same time; save from rank 0 only "
            "(`if dist.get_rank() == 0:`)"
        )
        yield ctx.finding("TD603", save, message, _guard_fix(ctx, save))


def _per_rank_file(save: ast.Call) -> bool:
    """`torch.save(shard, f"ckpt_rank{rank}.pt")`: each rank writes its own file on purpose."""
    targets = [*save.args[1:], *(k.value for k in save.keywords if k.arg == "f")]
    return any(mentions_rank(target) for target in targets)


def _is_main_name(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return bool(MAIN_PROCESS_NAME.match(node.id))
    if isinstance(node, ast.Attribute):
        return bool(MAIN_PROCESS_NAME.match(node.attr))
    return False


def _is_zero(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in (0, "0") and node.value is not False


def _is_one(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == 1 and node.value is not True


def _rank_test(test: ast.AST, sem: Semantics | None = None, depth: int = 0) -> str | None:
    """ "main" when `test` holds on rank 0 only, "other" when it holds on every other rank.
    With `sem`, a flag (`args.save_logs`) counts as what every value it is assigned tests, and
    a call of a function of this file as what it returns (`def should_write(): return r == 0`)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _rank_test(test.operand, sem, depth)
        if inner == "main":
            return "other"
        if inner == "other":
            return "main"
        return "main" if mentions_rank(test.operand) else None  # `not rank`
    if isinstance(test, ast.BoolOp):
        parts = [_rank_test(value, sem, depth) for value in test.values]
        if isinstance(test.op, ast.And):
            if "main" in parts:
                return "main"
            if "other" in parts and all(
                part == "other" or _tests_distributed_state(value)
                for part, value in zip(parts, test.values, strict=True)
            ):
                return "other"  # `dist.is_initialized() and dist.get_rank() != 0`
            return None
        if "other" in parts:
            return "other"
        return "main" if "main" in parts else None
    if _is_main_name(test):
        return "main"
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        return _rank_comparison(test.left, test.ops[0], test.comparators[0])
    if isinstance(test, ast.Name | ast.Attribute | ast.Call) and mentions_rank(test):
        return "other"  # `if rank:` holds on every rank but 0
    if sem is None or depth >= MAX_HELPER_DEPTH:
        return None
    if isinstance(test, ast.Name | ast.Attribute):
        dotted = sem.dotted(test)
        values = sem.assigned_values(dotted) if dotted is not None else []
        if values and all(_rank_test(value, sem, depth + 1) == "main" for value in values):
            return "main"  # `save = args.out and is_master(args)` ... `if save:`
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name):
        helper = module_functions(sem).get(test.func.id)
        if helper is not None and sem.qualname(test.func) is None:
            return _helper_test(sem, helper, depth + 1)
    return None


def _helper_test(sem: Semantics, helper: Function, depth: int) -> str | None:
    """ "main" when every value the function returns is a rank-0 test, or `True` where it is not
    distributed at all (`if not dist.is_initialized(): return True`). Memoised per function."""
    memo: dict[tuple[int, int], str | None] = sem.derived.setdefault("distributed:helper_tests", {})
    key = (id(helper), depth)
    if key not in memo:
        memo[key] = _decide_helper_test(sem, helper, depth)
    return memo[key]


def _decide_helper_test(sem: Semantics, helper: Function, depth: int) -> str | None:
    returns = [
        node.value
        for node in walk(helper)
        if isinstance(node, ast.Return) and sem.enclosing_function(node) is helper
    ]
    tests = [
        value for value in returns if not (isinstance(value, ast.Constant) and value.value is True)
    ]
    if not tests:
        return None  # no return, or `return True` alone: says nothing about ranks
    if all(value is not None and _rank_test(value, sem, depth) == "main" for value in tests):
        return "main"
    return None


def _tests_distributed_state(test: ast.AST) -> bool:
    """`args.distributed`, `dist.is_initialized()`, `is_dist_avail_and_initialized()`,
    `world_size > 1`: true exactly when there are other ranks at all."""
    text = ast.unparse(test).lower()
    return any(word in text for word in DISTRIBUTED_STATE_WORDS)


def _rank_comparison(left: ast.AST, op: ast.cmpop, right: ast.AST) -> str | None:
    if isinstance(op, ast.In | ast.NotIn) and isinstance(right, ast.List | ast.Tuple | ast.Set):
        values = {e.value for e in right.elts if isinstance(e, ast.Constant)}
        if mentions_rank(left) and values and values <= {0, -1, "0", "-1"}:
            return "main" if isinstance(op, ast.In) else "other"
        return None
    if _is_one(right) and mentions_rank(left):  # `rank < 1`, `rank >= 1`
        return "main" if isinstance(op, ast.Lt) else "other" if isinstance(op, ast.GtE) else None
    if _is_one(left) and mentions_rank(right):  # `1 > rank`, `1 <= rank`
        return "main" if isinstance(op, ast.Gt) else "other" if isinstance(op, ast.LtE) else None
    if _is_zero(right) and mentions_rank(left):
        rank_side_first = True
    elif _is_zero(left) and mentions_rank(right):
        rank_side_first = False
    elif (
        isinstance(op, ast.Eq)
        and isinstance(right, ast.UnaryOp)
        and mentions_rank(left)
        and isinstance(right.op, ast.USub)
    ):
        return "main"  # `local_rank == -1`: not distributed at all
    else:
        return None
    if isinstance(op, ast.Eq):
        return "main"
    if isinstance(op, ast.NotEq):
        return "other"
    if isinstance(op, ast.Gt if rank_side_first else ast.Lt):
        return "other"
    if isinstance(op, ast.LtE if rank_side_first else ast.GtE):
        return "main"
    return None


def _rank_branches(
    node: ast.If, sem: Semantics | None = None
) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """The branches of an `if` that only rank 0 runs and that only the other ranks run (both
    empty when its test does not tell the ranks apart)."""
    test = _rank_test(node.test, sem)
    if test == "main":
        return node.body, node.orelse
    if test == "other":
        return node.orelse, node.body
    return [], []


def _exits(block: list[ast.stmt]) -> bool:
    if not block:
        return False
    last = block[-1]
    if isinstance(last, ast.Return | ast.Continue | ast.Break | ast.Raise):
        return True
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
        func = last.value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in EXIT_CALLS
    return False


class _RankGuards:
    """Whether code runs on every rank: rank-0 tests around it, early exits of the other ranks
    before it, and the guards around the calls of the function that holds it."""

    def __init__(self, sem: Semantics) -> None:
        self.sem = sem
        self.memo: dict[int, bool] = {}
        self.launches: bool | None = None

    def guarded_in_scope(self, node: ast.AST) -> bool:
        sem = self.sem
        child = node
        for ancestor in sem.ancestors(node):
            if isinstance(child, ast.stmt) and self._other_ranks_left_before(child):
                return True
            if isinstance(ancestor, ast.If):
                rank_zero_only, _ = _rank_branches(ancestor, self.sem)
                if child in rank_zero_only:
                    return True
            if isinstance(ancestor, ast.FunctionDef | ast.AsyncFunctionDef):
                return self._helper_for_rank_zero(ancestor)
            if isinstance(ancestor, ast.ClassDef | ast.Lambda):
                return False
            child = ancestor
        return False

    def _other_ranks_left_before(self, statement: ast.AST) -> bool:
        if not isinstance(statement, ast.stmt):
            return False
        block = statement_list_of(self.sem, statement)
        if block is None:
            return False
        for earlier in block[: block.index(statement)]:
            if not isinstance(earlier, ast.If):
                continue
            _, other_ranks_only = _rank_branches(earlier, self.sem)
            if _exits(other_ranks_only):
                return True
        return False

    def _helper_for_rank_zero(self, function: Function) -> bool:
        if SAVE_HELPER_NAME.search(function.name):
            return True
        return any(_is_main_name(decorator) for decorator in function.decorator_list)

    def reached_on_every_rank(self, node: ast.AST, depth: int = 0) -> bool:
        if self.guarded_in_scope(node):
            return False
        function = self.sem.enclosing_function(node)
        if function is None:
            if any(isinstance(a, ast.ClassDef | ast.Lambda) for a in self.sem.ancestors(node)):
                return False
            return not (self._launches_workers() and self._under_module_condition(node))
        if depth > 4:
            return False
        key = id(function)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = False  # recursion: assume guarded
        callers = self._callers(function)
        if callers is None:
            result = self._entry_point(function, depth)
        else:
            result = any(self.reached_on_every_rank(call, depth + 1) for call in callers)
        self.memo[key] = result
        return result

    def _callers(self, function: Function) -> list[ast.Call] | None:
        """The calls of `function` in this file; None when there are none."""
        sem = self.sem
        cls = enclosing_class(sem, function)
        if cls is not None and methods_of(cls).get(function.name) is function:
            calls = [
                call for call in sem.method_calls(function.name) if _calls_method_of(sem, call, cls)
            ]
        elif at_module_level(sem, function):
            calls = list(calls_by_name(sem, function.name))
        else:
            return []
        return calls or None

    def _entry_point(self, function: Function, depth: int) -> bool:
        """A function nobody here calls runs on every rank when it is handed to a launcher
        (`mp.spawn(main_worker, ...)`, `Process(target=run)`), and where the call runs that it
        is handed to otherwise (`show_example(load_vocab)`, `atexit.register(save)`); with
        neither, its callers are elsewhere and may well guard it."""
        if not at_module_level(self.sem, function):
            return False
        for call in self.sem.calls:
            values = [*call.args, *(k.value for k in call.keywords)]
            if not any(isinstance(v, ast.Name) and v.id == function.name for v in values):
                continue
            if last_name(self.sem, call.func) in LAUNCHERS:
                return True
            if self.reached_on_every_rank(call, depth + 1):
                return True
        return False

    def _launches_workers(self) -> bool:
        """The file starts its worker processes itself (`mp.spawn`, `Process`): its own module
        level is the launching process, not a rank."""
        if self.launches is None:
            self.launches = any(
                last_name(self.sem, call.func) in LAUNCHERS for call in self.sem.calls
            )
        return self.launches

    def _under_module_condition(self, node: ast.AST) -> bool:
        """Inside an `if` at module level (`if __name__ == "__main__":`, a notebook check):
        code a spawned worker's re-import of the file does not run. Unguarded module-level
        code runs again in every worker the spawn start method starts."""
        return any(isinstance(ancestor, ast.If) for ancestor in self.sem.ancestors(node))


def _calls_method_of(sem: Semantics, call: ast.Call, cls: ast.ClassDef) -> bool:
    """`self.save()` inside the class, or `trainer.save()` on `trainer = Trainer(...)`."""
    func = call.func
    if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
        return False
    if func.value.id in sem.imports:
        return False  # `torch.save(...)`, `os.path.join(...)`: a module, not an instance
    if func.value.id == "self":
        return enclosing_class(sem, call) is cls
    return class_of_instance(sem, func.value.id, call) is cls


def _guard_fix(ctx: RuleContext, save: ast.Call) -> Fix | None:
    sem = ctx.sem
    statement = sem.parent(save)
    if not isinstance(statement, ast.Expr) or not ctx.statement_owns_lines(statement):
        return None
    dist = sem.spelling("torch.distributed")
    if dist is None:
        return None
    doc = ctx.doc
    span = doc.span_of(statement)
    unit = indent_unit(ctx)
    indent = doc.indentation_of(span.start_line)
    edits = indent_lines(ctx, span.start_line, span.end_line, unit)
    if not edits or edits[0].span.start_line != span.start_line:
        return None
    guard = f"if not {dist}.is_initialized() or {dist}.get_rank() == 0:"
    first = Edit(
        Span(span.start_line, 0, span.start_line, 0), f"{indent}{guard}{doc.line_break()}{unit}"
    )
    return Fix("Save from rank 0 only", (first, *edits[1:]), safe=False)
