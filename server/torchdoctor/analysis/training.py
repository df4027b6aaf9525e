"""The shape of training code: which loops train, and where in them gradients are computed,
applied and zeroed. Shared by the autograd, evaluation and data rules."""

from __future__ import annotations

import ast
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from operator import attrgetter
from typing import TypeVar

from .semantics import (
    FUNCTION_NODES,
    LOOP_NODES,
    BlockIndex,
    Function,
    Loop,
    Semantics,
    ValueKind,
    call_order,
    dotted_name,
    end_position,
    is_zeroing,
    position,
    starting_within,
)
from .summaries import is_zeroing_scale

# `fill_`/`mul_` zero a gradient only with 0 (`mul_(1 / n)` averages it); `detach_` zeroes nothing
ZEROING_ATTRS = frozenset({"zero_", "fill_", "mul_"})
EXIT_STATEMENTS = (ast.Continue, ast.Break, ast.Return, ast.Raise)
# Below these, code may not run on every pass through the loop around them: a branch, an
# `except:`, a short-circuit, a comprehension, a nested function or class.
BRANCH_NODES = (
    ast.If,
    ast.IfExp,
    ast.Match,
    ast.ExceptHandler,
    ast.BoolOp,
    ast.comprehension,
    *FUNCTION_NODES,
)
BRANCH_TYPES = frozenset(BRANCH_NODES)
_BRANCH_AND_LOOP_TYPES = frozenset({*BRANCH_NODES, *LOOP_NODES})

_Node = TypeVar("_Node", bound=ast.AST)
# where a located node starts (`position` of a call or a statement), read in C: a sort key
_start: Callable[[ast.AST], tuple[int, int]] = attrgetter("lineno", "col_offset")
# the line a located node starts on: a bisection key compared in C without a tuple
_line: Callable[[ast.AST], int] = attrgetter("lineno")


@dataclass
class TrainingLoop:
    """A loop whose iterations each reach `.backward()` and an optimizer step."""

    loop: Loop
    backward_calls: list[ast.Call] = field(default_factory=list)
    step_calls: list[ast.Call] = field(default_factory=list)
    zeroing: list[ast.AST] = field(default_factory=list)

    @property
    def optimizer_names(self) -> list[str]:
        names: list[str] = []
        for call in self.step_calls:
            name = step_target_name(call)
            if name is not None and name not in names:
                names.append(name)
        return names


@dataclass
class TrainingStructure:
    sem: Semantics

    @cached_property
    def backward_calls(self) -> list[ast.Call]:
        sem = self.sem
        calls = [c for c in sem.method_calls("backward") if is_backward_call(sem, c)]
        # a group of calls by callee is in source order already: a sort only after adding
        # `torch.autograd.backward(...)`, which most files never call
        through_autograd = sem.calls_to("torch.autograd.backward")
        if through_autograd:
            calls.extend(through_autograd)
            calls.sort(key=position)
        return calls

    @cached_property
    def step_calls(self) -> list[ast.Call]:
        return [c for c in self.sem.method_calls("step") if is_optimizer_step(self.sem, c)]

    @cached_property
    def zeroing_nodes(self) -> list[ast.AST]:
        # found block by block and kept on each block (see Semantics.per_block); the whole
        # file's are grouped across versions (Semantics.gathered)
        sem = self.sem
        if sem.whole is sem:
            whole_file: list[ast.AST] = sem.gathered("training:zeroing", _zeroing_group).get("", [])
            return whole_file
        # a name of its own: a block keeps each fact under its name, and the whole file's
        # group above keeps a dict where this keeps a list
        return [
            node
            for found in sem.per_block("training:zeroing-in-block", _zeroing_in_block)
            for node in found
        ]

    @cached_property
    def zeroing_functions(self) -> set[str]:
        """Local functions (by name) that zero gradients, directly or through another one:
        calling one (`reset_grads(model)`) counts as zeroing. A fact of the whole file."""
        if self.sem.whole is not self.sem:
            return training_of(self.sem.whole).zeroing_functions
        names: set[str] = set()
        for node in self.zeroing_nodes:
            function = self.sem.enclosing_function(node)
            if function is not None:
                names.add(function.name)
        pending = list(names)
        while pending:  # callers of a zeroing function zero gradients too
            for call in self._calls_by_called_name(pending.pop()):
                function = self.sem.enclosing_function(call)
                if function is not None and function.name not in names:
                    names.add(function.name)
                    pending.append(function.name)
        return names

    def _calls_by_called_name(self, name: str) -> list[ast.Call]:
        """The calls that may run a local function `name`, `name(...)` and `x.name(...)`, in
        source order, found among the calls grouped by callee. Not an optimizer step
        (`opt.step()`, `scaler.step(opt)`): it runs torch's even where the file defines a `step`
        of its own that zeroes gradients (`Trainer.step(loss)`)."""
        sem = self.sem
        found = list(sem.calls_by_name.get(name, ()))
        by_attribute = sem.calls_by_attr.get(name, ())
        if by_attribute:
            found.extend(call for call in by_attribute if not is_optimizer_step(sem, call))
            found.sort(key=call_order)
        return found

    @cached_property
    def zeroing_helper_calls(self) -> list[ast.Call]:
        """Calls of the local functions that zero gradients, in source order."""
        names = self.zeroing_functions
        if not names:
            return []
        if len(names) == 1:
            return self._calls_by_called_name(next(iter(names)))
        found = [call for name in names for call in self._calls_by_called_name(name)]
        found.sort(key=call_order)
        return found

    def calls_in(self, loop: Loop) -> list[ast.Call]:
        """The calls in a loop's body (nested loops included, nested functions not), in source
        order, found when first asked: most loops are never asked about."""
        cache: dict[int, list[ast.Call]] = self.sem.derived.setdefault("training:calls_in", {})
        found = cache.get(id(loop))
        if found is None:
            found = cache[id(loop)] = calls_in_body(self._calls_around(loop), self.sem, loop)
        return found

    def _calls_around(self, loop: Loop) -> list[ast.Call]:
        """The calls of the blocks this structure's semantics lists when they hold the loop
        (an edit's: a keystroke never gathers the whole file's calls), else the file's."""
        sem = self.sem
        listed: set[int] | None = sem.derived.get("training:listed-loops")
        if listed is None:
            listed = sem.derived["training:listed-loops"] = {id(each) for each in sem.loops}
        return sem.calls if id(loop) in listed else sem.whole.calls

    def backward_or_step_in(self, loop: Loop) -> bool:
        """A backward() or an optimizer step runs in `loop` (directly or in a loop inside it)."""
        key = id(loop)
        return key in self._backward_by_loop or key in self._steps_by_loop

    def steps_in(self, loop: Loop) -> list[ast.Call]:
        """The optimizer steps that run in `loop` (directly or in a loop inside it)."""
        return self._steps_by_loop.get(id(loop), [])

    def zeroing_in(self, loop: Loop) -> list[ast.AST]:
        found = self._zeroing_by_loop.get(id(loop))
        if found:
            return list(found)
        return list(self._zeroing_helper_calls_by_loop.get(id(loop), []))

    # Each list of nodes grouped by every loop it runs in, kept on the structure: rules ask
    # about loop after loop, each a lookup.
    @cached_property
    def _backward_by_loop(self) -> dict[int, list[ast.Call]]:
        return _by_loop(self.sem, self.backward_calls)

    @cached_property
    def _steps_by_loop(self) -> dict[int, list[ast.Call]]:
        return _by_loop(self.sem, self.step_calls)

    @cached_property
    def _zeroing_by_loop(self) -> dict[int, list[ast.AST]]:
        return _by_loop(self.sem, self.zeroing_nodes)

    @cached_property
    def _zeroing_helper_calls_by_loop(self) -> dict[int, list[ast.Call]]:
        return _by_loop(self.sem, self.zeroing_helper_calls)

    @cached_property
    def training_loops(self) -> list[TrainingLoop]:
        """For each optimizer step, the innermost loop around it that also reaches backward(),
        with the gradient zeroing in it."""
        return [
            TrainingLoop(loop, backward_calls, step_calls, self.zeroing_in(loop))
            for loop, backward_calls, step_calls in self._loops_that_train
        ]

    def first_training_loop(self) -> Loop | None:
        """The first of `training_loops`, without finding the zeroing in each."""
        loops = self._loops_that_train
        return loops[0][0] if loops else None

    @cached_property
    def _loops_that_train(self) -> list[tuple[Loop, list[ast.Call], list[ast.Call]]]:
        """Each training loop with its backward() calls and optimizer steps, in source order."""
        sem = self.sem
        if not sem.loops or not self.step_calls:
            return []  # every training loop steps an optimizer: most files never do
        # every loop around some backward(), with those calls: one grouping, not one scan of
        # all backward() per loop
        backward_by_loop = self._backward_by_loop
        loops: dict[int, tuple[Loop, list[ast.Call], list[ast.Call]]] = {}
        for step in self.step_calls:
            for loop in sem.enclosing_loops(step):
                key = id(loop)
                if key in backward_by_loop:
                    entry = loops.get(key)
                    if entry is None:
                        entry = loops[key] = (loop, list(backward_by_loop[key]), [])
                    entry[2].append(step)
                    break
        return sorted(loops.values(), key=lambda entry: _start(entry[0]))

    def loops_with_backward(self) -> list[Loop]:
        seen: dict[int, Loop] = {}
        for call in self.backward_calls:
            for loop in self.sem.enclosing_loops(call):
                seen.setdefault(id(loop), loop)
        return sorted(seen.values(), key=_start)


def _by_loop(sem: Semantics, nodes: Sequence[_Node]) -> dict[int, list[_Node]]:
    """`nodes` grouped by (the id of) every loop they run in, keeping their order: one pass
    instead of a scan of all nodes per loop."""
    grouped: dict[int, list[_Node]] = {}
    enclosing_loops = sem.enclosing_loops
    for node in nodes:
        for loop in enclosing_loops(node):
            group = grouped.get(id(loop))
            if group is None:
                grouped[id(loop)] = [node]
            else:
                group.append(node)
    return grouped


def calls_in_body(
    calls: Sequence[ast.Call],
    sem: Semantics,
    loop: Loop,
    wanted: Callable[[ast.Call], bool] | None = None,
) -> list[ast.Call]:
    """Of `calls` (in source order, the loop's among them), those that start inside the loop's
    body, a run of them found by position rather than by walking every node of the body, less
    those under a function, class or lambda defined there: they run when that is called, not
    in the iteration. With `wanted`, only the calls it answers yes for, asked before the climb
    that tells the rest."""
    parents = sem.parents
    body = loop.body
    start_line, start_column = body[0].lineno, body[0].col_offset
    end_line, end_column = end_position(body[-1])
    found: list[ast.Call] = []
    # the run starts at the first call on the body's first line, bisected by line alone (ints
    # compared in C: a key of line and column builds a tuple at each step, and costs three
    # times as much), and ends at the first call past the body, met on the way: a loop's calls
    # are few, one compare each costs less than a second bisection
    for index in range(bisect_left(calls, start_line, key=_line), len(calls)):
        call = calls[index]
        line = call.lineno
        if line == start_line and call.col_offset < start_column:
            continue  # on the loop's first line, before its body: `for x in f(y): g(x)`
        if line > end_line or (line == end_line and call.col_offset >= end_column):
            break
        if wanted is not None and not wanted(call):
            continue
        node = parents.get(call)
        while node is not loop and node is not None and not isinstance(node, FUNCTION_NODES):
            node = parents.get(node)
        if node is loop:
            found.append(call)
    return found


def is_backward_call(sem: Semantics, call: ast.Call) -> bool:
    """`loss.backward()`, `scaler.scale(loss).backward()`, `accelerator.backward(loss)`."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr != "backward":
        return False
    # `model.backward(...)` is a method of the user's own class, not autograd (DeepSpeed engines
    # zero their gradients themselves in step())
    return sem.kind_of(func.value) is not ValueKind.MODEL


def is_optimizer_step(sem: Semantics, call: ast.Call) -> bool:
    """`opt.step()`, `opt.step(closure)`, `scaler.step(opt)`; not `scheduler.step()`."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr != "step":
        return False
    kind = sem.kind_of(func.value)
    if kind is ValueKind.OPTIMIZER:
        return True
    if kind is ValueKind.SCHEDULER:
        return False
    # GradScaler.step(optimizer)
    return bool(call.args) and sem.kind_of(call.args[0]) is ValueKind.OPTIMIZER


def step_target_name(call: ast.Call) -> str | None:
    """The optimizer a step applies: `opt` for `opt.step()` and for `scaler.step(opt)`."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    receiver = dotted_name(func.value)
    if call.args and receiver is not None and "scaler" in receiver.lower():
        return dotted_name(call.args[0])
    return receiver


def zeroing_receiver(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return dotted_name(node.func.value)
    return None


def statement_list_of(sem: Semantics, statement: ast.stmt) -> list[ast.stmt] | None:
    """The block (list of statements) that holds `statement`."""
    parent = sem.parent(statement)
    if parent is None:
        return None
    for name in ("body", "orelse", "finalbody", "handlers"):
        block = getattr(parent, name, None)
        if isinstance(block, list) and statement in block:
            return block
    return None


def exits_after(sem: Semantics, statement: ast.stmt) -> bool:
    """True when the block holding `statement` leaves the iteration right after it
    (`continue`, `break`, `return`, `raise`): what follows is not reached from here."""
    cache: dict[int, bool] = sem.derived.setdefault("exits_after", {})
    known = cache.get(id(statement))
    if known is not None:
        return known
    block = statement_list_of(sem, statement)
    exits = False
    if block is not None:
        # one scan per block: every statement before the last exit is followed by an exit
        last_exit = max(
            (i for i, s in enumerate(block) if isinstance(s, EXIT_STATEMENTS)), default=-1
        )
        for position, member in enumerate(block):
            cache[id(member)] = position < last_exit
        exits = cache[id(statement)]
    return exits


def runs_every_iteration(
    sem: Semantics, node: ast.AST, loop: ast.AST, *, inner_loops_conditional: bool
) -> bool:
    """True when nothing between `node` and `loop` makes it conditional (an `if`, an `except:`,
    a short-circuit; an inner loop too with `inner_loops_conditional`, since it may run zero
    times): it runs on every iteration that gets that far."""
    # a plain climb with exact type tests (the parser makes no subclasses): asked of most calls
    # in training loops
    conditional = _BRANCH_AND_LOOP_TYPES if inner_loops_conditional else BRANCH_TYPES
    parents = sem.parents
    ancestor = parents.get(node)
    while ancestor is not None:
        if ancestor is loop:
            return True
        if type(ancestor) in conditional:
            return False
        ancestor = parents.get(ancestor)
    return False


def in_exclusive_branches(sem: Semantics, first: ast.AST, second: ast.AST) -> bool:
    """True when the two nodes sit in different branches of one `if`/`try` (never both run)."""
    first_chain = [first, *sem.ancestors(first)]
    second_chain = [second, *sem.ancestors(second)]
    second_ids = {id(node) for node in second_chain}
    for index, node in enumerate(first_chain):
        if id(node) not in second_ids:
            continue
        if not isinstance(node, ast.If | ast.Try | ast.IfExp | ast.Match):
            return False
        child_of_first = first_chain[index - 1] if index else None
        child_of_second = second_chain[second_chain.index(node) - 1]
        return _branch_of(node, child_of_first) != _branch_of(node, child_of_second)
    return False


def _branch_of(node: ast.AST, child: ast.AST | None) -> str:
    for name in ("body", "orelse", "handlers", "finalbody", "cases"):
        block = getattr(node, name, None)
        if isinstance(block, list) and child in block:
            return name
        if block is child:
            return name
    return "test"


def _zeroing_group(sem: Semantics, block: BlockIndex) -> dict[str, list[ast.AST]]:
    found = _zeroing_in_block(sem, block)
    return {"": found} if found else {}


def _zeroing_in_block(sem: Semantics, block: BlockIndex) -> list[ast.AST]:
    """The statements and calls of a block that zero gradients, in source order."""
    groups: list[Sequence[ast.AST]] = []  # each in source order, as the block's lists are
    for attr, calls in block.calls_by_attr.items():
        if "zero_grad" in attr:
            groups.append(calls)  # `is_zeroing` says yes to each: the name spells zero_grad
        elif attr in ZEROING_ATTRS:
            groups.append([c for c in calls if is_zeroing(sem, c) and is_zeroing_scale(c)])
    for name, calls in block.calls_by_name.items():
        if "zero_grad" in name:
            groups.append(calls)
    if "grad" in block.identifiers:  # `p.grad = None` spells it
        groups.append(
            [
                assign
                for assign in block.assigns
                if not isinstance(assign, ast.AugAssign) and is_zeroing(sem, assign)
            ]
        )
    found = [group for group in groups if group]
    if len(found) == 1:
        return list(found[0])  # most files zero one way (`optimizer.zero_grad()`): no sort
    return sorted(chain.from_iterable(found), key=_start)


def function_scope(sem: Semantics, node: ast.AST) -> Function | ast.Module:
    return sem.enclosing_function(node) or sem.tree


def bound_by_iterations(sem: Semantics, name: str, loop: Loop) -> bool:
    """The loop's own target or an assignment in its iterations binds the plain `name` (`for x,
    y in loader`, `loss = ...` in the body): each is one of the definitions the data flow of
    its function finds in the loop, found here without building that flow. False says
    nothing: a `with ... as name` or an inner loop's target may still bind it there."""
    if type(loop) is not ast.While and _target_binds(loop.target, name):  # type: ignore[union-attr]  # For and AsyncFor have a target
        return True
    if _assigned_in_own_body(loop, name):
        return True  # `loss = ...` beside its use, the usual case: no look at the whole file
    assignments = sem.assignments_to(name)
    if not assignments:
        return False
    start, end = position(loop.body[0]), end_position(loop.body[-1])
    return any(sem.in_loop(assign, loop) for assign in starting_within(assignments, start, end))


def _assigned_in_own_body(loop: Loop, name: str) -> bool:
    """A statement of the loop's own body (not of a block inside it) assigns a value to the
    plain `name`: one of the assignments `bound_by_iterations` looks for, found without the
    file's assignments grouped by name or a climb from each of them."""
    for statement in loop.body:
        kind = type(statement)  # exact type tests: the parser makes no subclasses
        if kind is ast.Assign:
            for target in statement.targets:  # type: ignore[attr-defined]  # type() tested above
                if type(target) is ast.Name and target.id == name:
                    return True
        elif (
            kind is ast.AnnAssign
            and statement.value is not None  # type: ignore[attr-defined]  # type() tested above
            and type(statement.target) is ast.Name  # type: ignore[attr-defined]  # type() tested above
            and statement.target.id == name  # type: ignore[attr-defined]  # type() tested above
        ):
            return True
    return False


def _target_binds(target: ast.AST, name: str) -> bool:
    """An assignment target binds the plain `name` (unpacking included)."""
    # a loop over the target's parts, not a recursion: asked of most loops' `x, y` targets
    pending = [target]
    while pending:
        node = pending.pop()
        kind = type(node)  # exact type tests: the parser makes no subclasses
        if kind is ast.Name:
            if node.id == name:  # type: ignore[attr-defined]  # type() tested above
                return True
        elif kind is ast.Tuple or kind is ast.List:
            pending.extend(node.elts)  # type: ignore[attr-defined]  # type() tested above
        elif kind is ast.Starred:
            pending.append(node.value)  # type: ignore[attr-defined]  # type() tested above
    return False


def training_of(sem: Semantics) -> TrainingStructure:
    """The training structure of a document, computed once and shared by every rule; for a
    focused view (see `Semantics.focused_on`), of the loops in its blocks."""
    structure = sem.derived.get("training")
    if structure is None:
        structure = sem.derived["training"] = TrainingStructure(sem)
    return structure
