"""Function summaries: what each function of the file does to training state, computed once per
function and read at every call site.

A rule that asks "does this loop back-propagate?" must see `self.step(loss)` and
`loss_scaler(loss, optimizer)` as well as `loss.backward()`. Each local function gets a summary
(calls backward and on which parameter, steps an optimizer, zeroes or rescales gradients,
switches train/eval, runs without autograd); calls to local functions read it, and a call to a
function the file does not define that receives a loss or an optimizer *may* train, so the
rules that need "no backward here" stay quiet there.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from .semantics import FUNCTION_NODES, BlockIndex, Function, Semantics, ValueKind, position
from .tree_walk import child_nodes, walk

# `loss`, `total_loss`, `loss_g`, `lossD`: names that strongly imply a loss tensor
LOSS_NAME = re.compile(r"(^|_)loss|loss($|_|[A-Z0-9])", re.IGNORECASE)
LOSS_FUNCTION_SUFFIXES = ("_loss", "loss", "cross_entropy", "nll_loss", "kl_div", "_entropy")
LOSS_CALLEES = frozenset({"criterion", "loss_fn", "loss_func", "criterion_fn", "compute_loss"})
# Callees that take a loss without back-propagating it: builtins, containers, loggers.
NON_TRAINING_CALLEES = frozenset(
    {
        "print",
        "float",
        "int",
        "str",
        "repr",
        "len",
        "round",
        "abs",
        "isinstance",
        "format",
        "append",
        "extend",
        "insert",
        "add",
        "item",
        "detach",
        "tolist",
        "cpu",
        "numpy",
        "add_scalar",
        "add_scalars",
        "log",
        "log_dict",
        "info",
        "debug",
        "warning",
        "write",
        "set_postfix",
        "set_description",
        "isnan",
        "isfinite",
        "gather",
        "gather_for_metrics",
        "reduce",
        "all_reduce",
        "mean",
        "sum",
    }
)
BUILTIN_NAMES = frozenset(dir(builtins))
ZEROING_METHODS = ("zero_", "fill_", "mul_")
RESCALING_METHODS = ("mul_", "div_", "div", "mul")


@dataclass
class FunctionSummary:
    function: Function
    backward_parameters: set[str] = field(default_factory=set)  # parameters it back-propagates
    calls_backward: bool = False
    steps_optimizer: bool = False
    zeroes_gradients: bool = False
    rescales_gradients: bool = False
    switches_mode: bool = False
    runs_without_grad: bool = False  # decorated with no_grad or a local no-grad decorator
    wraps_in_no_grad: bool = False  # a decorator whose wrapper runs its argument under no_grad

    def copy(self) -> FunctionSummary:
        """A copy the propagation may change (faster than dataclasses.replace)."""
        copied = object.__new__(FunctionSummary)
        copied.__dict__.update(self.__dict__)
        copied.backward_parameters = set(self.backward_parameters)
        return copied

    @property
    def trains(self) -> bool:
        return self.calls_backward or self.steps_optimizer

    def spread_facts(self) -> tuple[bool, bool, bool, bool, bool, int]:
        """The facts that callers inherit: a change means the callers must be looked at again."""
        return (
            self.calls_backward,
            self.steps_optimizer,
            self.zeroes_gradients,
            self.rescales_gradients,
            self.switches_mode,
            len(self.backward_parameters),
        )


@dataclass
class Summaries:
    sem: Semantics
    by_function: dict[int, FunctionSummary]
    resolved: dict[int, Function]  # id of a call → the local function it runs
    # the calls that run a local function, with it, in source order
    local_calls: list[tuple[ast.Call, Function]] = field(default_factory=list)
    # the functions whose summary this version changed: copied from their block's first
    _written: set[int] = field(default_factory=set)

    def writable(self, function: Function) -> FunctionSummary:
        """The function's summary, to change: the block's own is shared by every version that
        keeps the block, so it is copied the first time."""
        key = id(function)
        summary = self.by_function[key]
        if key not in self._written:
            summary = self.by_function[key] = summary.copy()
            self._written.add(key)
        return summary

    def of(self, function: Function | None) -> FunctionSummary | None:
        return None if function is None else self.by_function.get(id(function))

    def called(self, call: ast.Call) -> FunctionSummary | None:
        function = self.resolved.get(id(call))
        return None if function is None else self.by_function.get(id(function))

    def in_no_grad(self, node: ast.AST) -> bool:
        """Under `no_grad`/`inference_mode`, including a function decorated with a decorator of
        this file whose wrapper runs the function under one."""
        sem = self.sem
        if sem.in_no_grad(node):
            return True
        function = sem.enclosing_function(node)
        summary = self.of(function)
        return summary is not None and summary.runs_without_grad

    def may_train(self, call: ast.Call) -> bool:
        """The call may back-propagate or step: a local function that does, or a function the
        file does not define that receives a loss or an optimizer (`loss_scaler(loss, opt)`,
        `backprop(loss)`)."""
        summary = self.called(call)
        if summary is not None:
            return summary.trains
        if id(call) in self.resolved:
            return False
        return receives_loss_or_optimizer(self.sem, call)


def in_no_grad(sem: Semantics, node: ast.AST) -> bool:
    """`Semantics.in_no_grad`, plus functions decorated with a decorator of this file that
    runs them under no_grad; the summaries are built only for a decorated function."""
    if sem.in_no_grad(node):
        return True
    function = sem.enclosing_function(node)
    if function is None or not function.decorator_list:
        return False
    summary = summaries_of(sem).of(function)
    return summary is not None and summary.runs_without_grad


def receives_loss_or_optimizer(sem: Semantics, call: ast.Call) -> bool:
    # pure conditions, the cheap tests of the callee first: the arguments' may follow a name
    # to every value the file assigns it
    callee = called_name(call)
    if callee is None or callee in NON_TRAINING_CALLEES or callee.startswith(("log", "print")):
        return False
    if isinstance(call.func, ast.Name) and call.func.id in BUILTIN_NAMES:
        return False
    qualname = sem.qualname(call.func) or ""
    if qualname.startswith(("torch.", "numpy.", "math.", "logging.", "wandb.")):
        return False
    if not any(_is_loss_or_optimizer(sem, argument) for argument in _arguments(call)):
        return False  # most calls receive neither a loss nor an optimizer
    # `scheduler.step(val_loss)`: ReduceLROnPlateau reads the value
    return not (
        isinstance(call.func, ast.Attribute) and sem.kind_of(call.func.value) is ValueKind.SCHEDULER
    )


def _arguments(call: ast.Call) -> list[ast.expr]:
    found = [a.value if isinstance(a, ast.Starred) else a for a in call.args]
    found.extend(k.value for k in call.keywords)
    return found


def _is_loss_or_optimizer(sem: Semantics, argument: ast.expr) -> bool:
    if isinstance(argument, ast.Name | ast.Attribute):
        dotted = sem.dotted(argument)
        if dotted is None:
            return False
        if LOSS_NAME.search(dotted.rsplit(".", 1)[-1]):
            return True
        if sem.kind_of(argument) is ValueKind.OPTIMIZER:
            return True
        # a loss under another name: `err = criterion(out, y)`, then `backprop(err)`
        return isinstance(argument, ast.Name) and _assigned_a_loss(sem, dotted)
    return isinstance(argument, ast.Call) and _is_loss_call(sem, argument)


def _assigned_a_loss(sem: Semantics, name: str) -> bool:
    """Some assignment in the file gives `name` a loss. Memoised per version: loops ask it for
    every argument named `x` or `batch`, and such names have many assignments."""
    cache: dict[str, bool] = sem.derived.setdefault("summaries:assigned-a-loss", {})
    found = cache.get(name)
    if found is None:
        found = cache[name] = any(computes_loss(sem, value) for value in sem.assigned_values(name))
    return found


def _is_loss_call(sem: Semantics, call: ast.Call) -> bool:
    """`criterion(out, y)`, `F.cross_entropy(...)`: the call itself computes a loss."""
    func = call.func
    if sem.kind_of(func) is ValueKind.CRITERION:
        return True
    qualname = sem.qualname(func) or ""
    if qualname.startswith("torch.nn.functional.") and qualname.endswith(LOSS_FUNCTION_SUFFIXES):
        return True
    return (sem.dotted(func) or "").rsplit(".", 1)[-1] in LOSS_CALLEES


def computes_loss(sem: Semantics, value: ast.AST) -> bool:
    """`criterion(out, y)`, `F.mse_loss(...)`, `outputs.loss`, and sums of them; not a value
    cut from autograd (`.item()`, `.detach()`, `.data`)."""
    pending = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Attribute):
            if node.attr in ("data", "shape", "dtype", "device"):
                continue
            if node.attr == "loss" and isinstance(node.value, ast.Name):
                return True  # Hugging Face `outputs.loss`
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("item", "detach", "tolist"):
                continue
            if sem.kind_of(func) is ValueKind.CRITERION:
                return True
            qualname = sem.qualname(func) or ""
            if qualname.startswith("torch.nn.functional.") and qualname.endswith(
                LOSS_FUNCTION_SUFFIXES
            ):
                return True
            dotted = sem.dotted(func) or ""
            if dotted.rsplit(".", 1)[-1] in LOSS_CALLEES:
                return True
        if isinstance(node, FUNCTION_NODES):
            continue
        pending.extend(child_nodes(node))
    return False


# the names a loss needs the file to spell: `outputs.loss`, a loss callee, a backward call
_LOSS_SPELLINGS = frozenset({"loss", "backward", *LOSS_CALLEES})


def may_compute_losses(sem: Semantics) -> bool:
    """Whether `computes_loss` can hold anywhere in the file, or a backward call take a loss:
    false for most library code, whose rules about losses can stop before their walks."""
    whole = sem.whole
    if whole.mentions(_LOSS_SPELLINGS) or ValueKind.CRITERION in whole.kinds.values():
        return True
    return any(
        qualname == "torch.autograd.backward"
        or (
            qualname.startswith("torch.nn.functional.")
            and qualname.endswith(LOSS_FUNCTION_SUFFIXES)
        )
        for qualname in whole.calls_by_qualname
    )


def returned_names(sem: Semantics, function: Function) -> frozenset[str]:
    """Dotted names a function's `return` statements hand back with their autograd history
    (`return total`, `return total / n`, `return {"loss": total}`). Memoised per function:
    each body is walked once."""
    sem = sem.whole
    cache: dict[int, frozenset[str]] = sem.derived.setdefault("summaries:returned", {})
    found = cache.get(id(function))
    if found is None:
        names: set[str] = set()
        stack: list[ast.AST] = list(function.body)
        while stack:
            node = stack.pop()
            if isinstance(node, FUNCTION_NODES):
                continue
            if isinstance(node, ast.Return) and node.value is not None:
                names.update(_names_with_history(sem, node.value))
                continue
            stack.extend(child_nodes(node))
        found = cache[id(function)] = frozenset(names)
    return found


def _names_with_history(sem: Semantics, expr: ast.AST) -> list[str]:
    found: list[str] = []
    pending = [expr]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("item", "detach", "tolist", "numpy"):
                continue
        if isinstance(node, ast.Attribute) and node.attr == "data":
            continue
        dotted = sem.dotted(node) if isinstance(node, ast.Name | ast.Attribute) else None
        if dotted is not None:
            found.append(dotted)
        pending.extend(child_nodes(node))
    return found


def called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def summaries_of(sem: Semantics) -> Summaries:
    """The summaries of every function of a document, computed once and shared by all rules."""
    sem = sem.whole
    found = sem.derived.get("summaries")
    if found is None:
        found = sem.derived["summaries"] = _build(sem)
    return found


@dataclass(frozen=True)
class FunctionIndex:
    """The file's plain functions and methods by name, to resolve a call in one lookup."""

    plain: Mapping[str, list[Function]]
    methods: Mapping[str, list[Function]]


def function_index(sem: Semantics) -> FunctionIndex:
    sem = sem.whole
    return FunctionIndex(sem.plain_functions_by_name, sem.methods_by_name)


def resolve_call(sem: Semantics, call: ast.Call) -> Function | None:
    """The local function or method a call runs: `evaluate(...)`, `self.evaluate(...)`, when
    exactly one function (or method) of the file has that name."""
    func = call.func
    index = function_index(sem)
    if isinstance(func, ast.Name):
        candidates = index.plain.get(func.id, ())
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        candidates = index.methods.get(func.attr, ())
    else:
        return None
    return candidates[0] if len(candidates) == 1 else None


# the methods whose calls a summary records (`loss.backward()`, `opt.step()`, `model.eval()`, …)
SUMMARISED_METHODS = ("backward", "step", "eval", "train", *ZEROING_METHODS, *RESCALING_METHODS)


@dataclass
class BlockSummaries:
    """What the summaries take from one block of the file (see semantics.BlockIndex): each
    function's own facts before its callees' are added. Kept while the block and the names'
    kinds and imports stay the same."""

    key: object  # the file's names key (Semantics.names_key) they were found under
    kinds_read: dict[str, ValueKind | None]  # the kinds of names they depend on
    own: list[FunctionSummary]  # never changed: each version copies them
    # the file's kinds they were last found true under (an edit that changes no kind keeps
    # the dict: then they hold without asking again)
    kinds: dict[str, ValueKind] | None = None

    def hold(self, sem: Semantics) -> bool:
        if self.key is not sem.names_key:
            return False
        if self.kinds is not sem.kinds:
            if any(sem.kind_of_name(name) is not kind for name, kind in self.kinds_read.items()):
                return False
            self.kinds = sem.kinds
        return True


def _build(sem: Semantics) -> Summaries:
    own_summaries = _own_summaries(sem)
    by_function = dict(own_summaries)  # an entry is copied when it changes (Summaries.writable)
    resolved: dict[int, Function] = {}
    local_calls = local_calls_of(sem)
    callers: dict[int, list[tuple[ast.Call, Function]]] = {}
    callees: list[Function] = []  # those with callers, by their first call
    for call, target in local_calls:
        resolved[id(call)] = target
        owner = sem.enclosing_function(call)
        if owner is not None and target is not owner:
            found = callers.get(id(target))
            if found is None:
                found = callers[id(target)] = []
                callees.append(target)
            found.append((call, owner))
    summaries = Summaries(sem, by_function, resolved, local_calls)
    _mark_no_grad_decorators(sem, summaries)
    _propagate(sem, summaries, callers, callees)
    return summaries


def local_calls_of(sem: Semantics) -> list[tuple[ast.Call, Function]]:
    """The calls that may run a local function, with it, in source order: by the name of each
    function that is the only one (plain or method) of its name, `name(...)` or `x.name(...)`.
    Found once per version, without the summaries (a rule may ask first whether any is worth
    summarising)."""
    sem = sem.whole
    found: list[tuple[ast.Call, Function]] | None = sem.derived.get("summaries:local-calls")
    if found is not None:
        return found
    found = sem.derived["summaries:local-calls"] = []
    # plain loops, no generator per name: most of a file's functions are never called by
    # name in it, and a generator's frame cost more than the look-up that finds no call.
    # Each name's calls are in source order, and so is the list while each name's first call
    # starts no earlier than the call before it: then it needs no sort (most files call few
    # local functions, each from few places, one after another)
    in_order = True
    calls_by_name = sem.calls_by_name
    for name, candidates in sem.plain_functions_by_name.items():
        if len(candidates) == 1:
            calls = calls_by_name.get(name)
            if calls:
                start = len(found)
                function = candidates[0]
                for call in calls:
                    found.append((call, function))
                in_order = in_order and _follows(found, start)
    calls_by_attr = sem.calls_by_attr
    for name, candidates in sem.methods_by_name.items():
        if len(candidates) == 1:
            calls = calls_by_attr.get(name)
            if calls:
                start = len(found)
                function = candidates[0]
                for call in calls:
                    if type(call.func.value) is ast.Name:  # type: ignore[attr-defined]  # calls by attribute call an ast.Attribute
                        found.append((call, function))
                in_order = in_order and _follows(found, start)
    if not in_order:
        found.sort(key=lambda pair: position(pair[0]))
    return found


def _follows(found: list[tuple[ast.Call, Function]], start: int) -> bool:
    """The calls from `start` on (one name's, in source order) start where the one before them
    does or later (or there is none before them, or none from `start` on)."""
    if start == 0 or start == len(found):
        return True
    return position(found[start - 1][0]) <= position(found[start][0])


def _own_summaries(sem: Semantics) -> dict[int, FunctionSummary]:
    """Each function's own summary, by its id: the previous version's, changed where blocks
    came and went, while no kind of name changed; else each block's, found again where the
    kinds it read changed."""
    carried = sem.fact_before("summaries:own")
    if carried is not None:
        before, change = carried
        own_summaries: dict[int, FunctionSummary] = dict(before)
        for block in change.gone:
            assert block.summaries is not None  # the previous version summarised every block
            for own in block.summaries.own:
                del own_summaries[id(own.function)]
        changed = change.added
    else:
        own_summaries = {}
        changed = sem.blocks
    for block in changed:
        parts = block.summaries
        if parts is None or not parts.hold(sem):
            parts = block.summaries = _block_summaries(sem, block, sem.names_key)
        for own in parts.own:
            own_summaries[id(own.function)] = own
    sem.keep_fact("summaries:own", own_summaries)
    return own_summaries


def _block_summaries(sem: Semantics, block: BlockIndex, key: object) -> BlockSummaries:
    # the kinds the block's summaries read are recorded: a later version reuses them while
    # those names keep their kinds (a rename elsewhere in the file changes other names')
    kinds_read: dict[str, ValueKind | None] = {}
    sem.kind_reads = kinds_read
    try:
        return _summaries_of_block(sem, block, key, kinds_read)
    finally:
        sem.kind_reads = None


def _summaries_of_block(
    sem: Semantics, block: BlockIndex, key: object, kinds_read: dict[str, ValueKind | None]
) -> BlockSummaries:
    own_calls: dict[int, list[ast.Call]] = {}
    for name, calls in block.calls_by_attr.items():
        if name in SUMMARISED_METHODS or "zero_grad" in name:
            for call in calls:
                owner = sem.enclosing_function(call)
                if owner is not None:
                    own_calls.setdefault(id(owner), []).append(call)
    own = []
    for function in block.functions:
        summary = FunctionSummary(function)
        _summarise_own_calls(sem, summary, own_calls.get(id(function)))
        own.append(summary)
    return BlockSummaries(key, kinds_read, own, sem.kinds)


def _summarise_own_calls(
    sem: Semantics, summary: FunctionSummary, calls: list[ast.Call] | None
) -> None:
    if not calls:
        return  # most functions make none of the calls a summary records
    parameters = _parameter_names(summary.function)
    for call in calls:
        func = call.func
        if not isinstance(func, ast.Attribute):
            continue
        attr = func.attr
        if attr == "backward" and sem.kind_of(func.value) is not ValueKind.MODEL:
            summary.calls_backward = True
            for root in (func.value, *call.args):
                name = _loss_root(root)
                if name is not None and name in parameters:
                    summary.backward_parameters.add(name)
        elif attr == "step" and (
            sem.kind_of(func.value) is ValueKind.OPTIMIZER
            or (call.args and sem.kind_of(call.args[0]) is ValueKind.OPTIMIZER)
        ):
            summary.steps_optimizer = True
        elif "zero_grad" in attr:
            summary.zeroes_gradients = True
        elif attr in ZEROING_METHODS + RESCALING_METHODS and _mentions_grad(func.value):
            if is_zeroing_scale(call):
                summary.zeroes_gradients = True
            else:
                summary.rescales_gradients = True
        elif is_mode_switch(sem, call):
            summary.switches_mode = True


def is_mode_switch(sem: Semantics, call: ast.Call) -> bool:
    """`model.eval()`, `model.train()`, `model.train(False)`: not `torch.eval`, not the
    `train()`/`eval()` of a schedule-free optimizer."""
    func = call.func
    # pure tests, the name first: most calls asked are of other methods
    if not isinstance(func, ast.Attribute) or func.attr not in ("eval", "train"):
        return False
    if func.attr == "eval" and (call.args or call.keywords):
        return False
    if sem.qualname(func) is not None:
        return False
    return sem.kind_of(func.value) is not ValueKind.OPTIMIZER


def is_zeroing_scale(call: ast.Call) -> bool:
    """`g.zero_()`, `g.fill_(0)`, `g.mul_(0)`: writes zeros; `g.mul_(1 / n)`, `g.div_(n)` do not."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr == "zero_":
        return True
    if func.attr in ("fill_", "mul_") and call.args:
        first = call.args[0]
        return isinstance(first, ast.Constant) and first.value == 0
    return False


def _loss_root(node: ast.AST) -> str | None:
    """`loss` in `loss.backward()`, `scaler.scale(loss).backward()`, `(loss / k).backward()`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        if node.func.attr == "scale":
            return _loss_root(node.args[0])
    if isinstance(node, ast.BinOp):
        return _loss_root(node.left)
    return node.id if isinstance(node, ast.Name) else None


def _mentions_grad(node: ast.AST) -> bool:
    while isinstance(node, ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Attribute) and node.attr == "grad":
            return True
        node = node.value
    return False


def _parameter_names(function: Function) -> list[str]:
    arguments = function.args
    return [
        a.arg
        for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)
        if a.arg not in ("self", "cls")
    ]


def _positional_parameters(sem: Semantics, function: Function) -> list[str]:
    names = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    if isinstance(sem.parent(function), ast.ClassDef) and names:
        names = names[1:]  # `self`
    return names


NO_GRAD_FACTORIES = (
    "torch.no_grad",
    "torch.inference_mode",
    "torch.autograd.no_grad",
    "torch.autograd.grad_mode.no_grad",
    "torch.autograd.grad_mode.inference_mode",
)


def _mark_no_grad_decorators(sem: Semantics, summaries: Summaries) -> None:
    """Local decorators whose wrapper calls the decorated function inside `with no_grad():`
    (or returns `torch.no_grad()(function)`), and the functions they decorate. Starts from the
    file's no_grad calls, so a file without any costs nothing."""
    wrappers: list[Function] = []  # the functions found to wrap their argument in no_grad
    for factory in sem.calls_to(*NO_GRAD_FACTORIES):
        holder = sem.parent(factory)
        if isinstance(holder, ast.withitem):
            holder = sem.parent(holder)
        if isinstance(holder, ast.With | ast.AsyncWith):
            body: list[ast.AST] = list(holder.body)
        elif isinstance(holder, ast.Call) and holder.func is factory:
            body = list(holder.args)  # `torch.no_grad()(function)`
        else:
            continue
        for outer in sem.ancestors(holder):
            if not isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            parameters = _positional_parameters(sem, outer)
            if parameters and any(_calls_or_names(node, parameters[0]) for node in body):
                summaries.writable(outer).wraps_in_no_grad = True
                wrappers.append(outer)
                break
    decorators = {f.name for f in wrappers if not isinstance(sem.parent(f), ast.ClassDef)}
    if not decorators:
        return
    for function in sem.functions:
        for decorator in function.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if isinstance(target, ast.Name) and target.id in decorators:
                summaries.writable(function).runs_without_grad = True


def _calls_or_names(node: ast.AST, name: str) -> bool:
    """`name(...)` somewhere in `node`, or `node` is the name itself."""
    if isinstance(node, ast.Name):
        return node.id == name
    return _calls_name(node, name)


def _calls_name(node: ast.AST, name: str) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
        for n in walk(node)
    )


def _propagate(
    sem: Semantics,
    summaries: Summaries,
    callers: dict[int, list[tuple[ast.Call, Function]]],
    callees: list[Function],
) -> None:
    """What a function's local callees do, it does: a worklist over the call edges (callee →
    its calls and their functions), each function revisited only when a callee's summary grew
    (the facts only ever grow)."""
    # only a function that some other function calls has facts to hand on
    pending = list(callees)
    while pending:
        callee = pending.pop()
        source = summaries.by_function[id(callee)]
        if not any(source.spread_facts()):
            continue  # nothing to hand on
        callee_parameters = (
            _positional_parameters(sem, callee) if source.backward_parameters else []
        )
        for call, caller in callers.get(id(callee), ()):
            summary = summaries.writable(caller)
            before = summary.spread_facts()
            summary.calls_backward |= source.calls_backward
            summary.steps_optimizer |= source.steps_optimizer
            summary.zeroes_gradients |= source.zeroes_gradients
            summary.rescales_gradients |= source.rescales_gradients
            summary.switches_mode |= source.switches_mode
            if source.backward_parameters:
                caller_parameters = set(_parameter_names(caller))
                for index, argument in enumerate(call.args):
                    if (
                        index < len(callee_parameters)
                        and callee_parameters[index] in source.backward_parameters
                        and isinstance(argument, ast.Name)
                        and argument.id in caller_parameters
                    ):
                        summary.backward_parameters.add(argument.id)
            after = summary.spread_facts()
            if after != before:
                pending.append(caller)
