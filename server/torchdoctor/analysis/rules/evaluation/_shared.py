"""What several of the evaluation rules share."""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from ...context import RuleContext
from ...dataflow import flow_of, names_with_history
from ...findings import Edit
from ...function_body import own_nodes
from ...semantics import (
    FUNCTION_NODES,
    BlockIndex,
    Function,
    Loop,
    Semantics,
    ValueKind,
    position,
)
from ...summaries import is_mode_switch, receives_loss_or_optimizer, summaries_of
from ...training import calls_in_body, is_backward_call, is_optimizer_step, training_of
from ...tree_walk import child_nodes

EVALUATION_FUNCTION = re.compile(
    r"(^|_)(eval|evaluate|evaluation|evaluator|valid|validate|validation|val|test|testing"
    r"|predict|prediction|predictions|infer|inference|sample|sampling|generate|generation"
    r"|score|scoring|accuracy|benchmark|translate|translation|visuali[sz]e|visuali[sz]ation"
    r"|plot|show|display|draw|beam_search|greedy_decode)($|_)",
    re.IGNORECASE,
)
DATA_NAME = re.compile(
    r"loader|dataset|batches|(^|_)(dl|ds|val|valid|validation|test|eval|testset|valset)($|_)",
    re.IGNORECASE,
)
LIGHTNING_HOOKS = re.compile(
    r"^((validation|test|predict)_step|on_(validation|test|predict)_\w+"
    r"|(validation|test)_epoch_end)$"
)
GRAD_MANAGERS = frozenset(
    {
        "torch.set_grad_enabled",
        "torch.enable_grad",
        "torch.autograd.set_grad_enabled",
        "torch.autograd.enable_grad",
        "torch.autograd.grad_mode.set_grad_enabled",
        "torch.autograd.grad_mode.enable_grad",
    }
)


@dataclass
class EvaluationLoop:
    """A loop that looks like evaluation, calls a model and has no backward() or optimizer step
    in it: a candidate, found by cheap tests; `is_evaluation_loop` says whether it is one."""

    loop: Loop
    model_calls: list[ast.Call]  # every model call in its body, in source order


@dataclass
class EvaluationFacts:
    resolved: dict[int, Function]  # call id -> the local function it runs
    calls_to_local: list[tuple[ast.Call, Function]]
    mode_functions: set[int]  # functions that call .train()/.eval(), directly or through helpers
    # the training nodes (backward, step and autograd.grad calls, calls to local training
    # helpers), in source order: per function (id, 0 for the module), and per loop around them
    nodes_by_function: Mapping[int, list[ast.AST]]
    nodes_by_loop: Mapping[int, list[ast.AST]]
    # per scope (function, class, lambda or module, by id): mode calls and local helper calls
    mode_nodes: dict[int, list[ast.Call]] = field(default_factory=dict)

    def trains_in(self, loop: ast.AST) -> bool:
        """The loop's body trains (a training node is in it)."""
        return id(loop) in self.nodes_by_loop

    def is_training_node(self, sem: Semantics, node: ast.AST) -> bool:
        owner = sem.enclosing_function(node)
        return any(step is node for step in self.nodes_by_function.get(_key(owner), ()))


def model_of(call: ast.Call) -> ast.expr:
    """The model a call runs: `model` for `model(x)` and for `model.forward(x)`."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "forward":
        return func.value
    return func


def is_model_call(sem: Semantics, call: ast.Call) -> bool:
    """`model(x)`, `self.net(x)`, and `model.forward(x)` (which runs the same layers)."""
    return is_model_value(sem, model_of(call))


def is_model_value(sem: Semantics, node: ast.AST) -> bool:
    """A name or `self.attr` that holds a model (by assignment, annotation, or its name); for
    other attributes (`writer.generator`) the name alone is not enough."""
    dotted = sem.dotted(node)
    if dotted is None:
        return False
    return _is_model_name(sem, _model_names(sem), node, dotted)


def _model_names(sem: Semantics) -> dict[str, bool]:
    """The answers of `is_model_value` so far, by dotted name (see `_is_model_name`)."""
    memo: dict[str, bool] | None = sem.derived.get("evaluation:model-names")
    if memo is None:
        memo = sem.derived["evaluation:model-names"] = {}
    return memo


def _is_model_name(sem: Semantics, memo: dict[str, bool], node: ast.AST, dotted: str) -> bool:
    """`is_model_value` of a node whose dotted name is `dotted`, memoised by that name: every
    test below reads the name alone (its qualname through the imports, its kind, the values
    assigned to it), so the calls of a loop that share a callee (`x.to(...)`, `y.to(...)`,
    `model(...)` in loop after loop) ask once."""
    answer = memo.get(dotted)
    if answer is None:
        answer = memo[dotted] = _names_model(sem, node, dotted)
    return answer


def _names_model(sem: Semantics, node: ast.AST, dotted: str) -> bool:
    if sem.qualname(node) is not None:
        return False
    if "." in dotted and not dotted.startswith("self."):
        return sem.kinds.get(dotted) is ValueKind.MODEL
    if dotted.rsplit(".", 1)[-1].startswith(FACTORY_PREFIXES) and dotted not in sem.kinds:
        return False  # `create_test_data_for_model(...)`, `build_model(cfg)`: a function
    return sem.kind_of(node) is ValueKind.MODEL and not _bound_to_helper_object(sem, dotted)


FACTORY_PREFIXES = ("create_", "build_", "make_", "get_", "load_", "init_", "setup_")
# transformers classes that are models; the package's other callables (StoppingCriteriaList,
# LogitsProcessorList, tokenizers, pipelines) are not modules with a train/eval mode
TRANSFORMERS_MODEL = re.compile(r"Model|For[A-Z]|Backbone")


def _bound_to_helper_object(sem: Semantics, dotted: str) -> bool:
    """Every object the file assigns to `dotted` is a transformers helper, not a model."""
    if "transformers" not in sem.imported_packages():
        return False  # no call's qualname starts with `transformers.`: none is a helper
    key = f"evaluation:helper-object:{dotted}"
    cached: bool | None = sem.derived.get(key)
    if cached is not None:
        return cached
    helper = False
    for value in sem.assigned_values(dotted):
        if not isinstance(value, ast.Call):
            continue
        qualname = sem.qualname(value.func) or ""
        if not qualname.startswith("transformers."):
            helper = False
            break
        parts = qualname.split(".")
        name = parts[-2] if parts[-1].startswith("from_") and len(parts) > 2 else parts[-1]
        if TRANSFORMERS_MODEL.search(name):
            helper = False
            break
        helper = True
    sem.derived[key] = helper
    return helper


# frameworks whose forward passes record no graph unless asked (autograd.record(),
# GradientTape, jax.grad) and whose models have no train/eval mode switched by eval()
OTHER_FRAMEWORKS = frozenset(
    {"mxnet", "tensorflow", "keras", "tf_keras", "jax", "flax", "haiku", "equinox", "mindspore"}
)


def facts_of(ctx: RuleContext) -> EvaluationFacts:
    """The evaluation facts of the whole file (for a focused view too)."""
    whole = ctx.sem.whole
    facts: EvaluationFacts | None = whole.derived.get("evaluation:file-facts")
    if facts is None:
        facts = whole.derived["evaluation:file-facts"] = _file_facts(whole)
    return facts


def evaluation_candidates(ctx: RuleContext) -> list[EvaluationLoop]:
    """The loops of the nodes the rules visit (all of the file's, or those of a focused view's
    blocks) that pass the cheap tests of an evaluation loop. A rule asks its own cheap tests of
    each, then `is_evaluation_loop`: most candidates of most files need no file facts then
    (a loop under no_grad is no TD401 finding, whatever else it is)."""
    sem = ctx.sem
    found: list[EvaluationLoop] | None = sem.derived.get("evaluation:candidates")
    if found is None:
        found = sem.derived["evaluation:candidates"] = []
        if not sem.imports_framework_without_torch(OTHER_FRAMEWORKS):
            _find_candidates(sem, found)
    return found


def is_evaluation_loop(ctx: RuleContext, candidate: EvaluationLoop) -> bool:
    """The candidate is an evaluation loop: nothing in it trains (a training helper included),
    it is not part of a training step, and no evaluation loop around it in the same function
    already holds its model calls (each belongs to the outermost one). Memoised per loop."""
    answers: dict[int, bool] = ctx.sem.derived.setdefault("evaluation:confirmed", {})
    key = id(candidate.loop)
    answer = answers.get(key)
    if answer is None:
        answer = answers[key] = _confirmed(ctx, candidate.loop)
    return answer


def _confirmed(ctx: RuleContext, loop: Loop) -> bool:
    facts = facts_of(ctx)
    if facts.trains_in(loop) or not _is_evaluation_loop(ctx, facts, loop):
        return False
    sem = ctx.sem
    # the loops around it whose bodies hold its calls: those of its own function
    # (`enclosing_loops` stops there, and a loop's calls leave out nested functions too)
    candidates = _candidates_by_loop(ctx)
    for around in sem.enclosing_loops(loop):
        outer = candidates.get(id(around))
        if outer is not None and is_evaluation_loop(ctx, outer):
            return False
    return True


def _candidates_by_loop(ctx: RuleContext) -> dict[int, EvaluationLoop]:
    sem = ctx.sem
    found: dict[int, EvaluationLoop] | None = sem.derived.get("evaluation:candidates-by-loop")
    if found is None:
        found = sem.derived["evaluation:candidates-by-loop"] = {
            id(candidate.loop): candidate for candidate in evaluation_candidates(ctx)
        }
    return found


def _file_facts(sem: Semantics) -> EvaluationFacts:
    """Which loops and functions train, switch modes or call which local functions."""
    summaries = summaries_of(sem)
    calls_to_local = summaries.local_calls
    # backward, step and autograd.grad calls, grouped block by block and kept across versions
    by_function: Mapping[int, list[ast.AST]] = sem.gathered(
        "evaluation:training-by-function", training_by_function, reads_kinds=True
    )
    by_loop: Mapping[int, list[ast.AST]] = sem.gathered(
        "evaluation:training-by-loop", training_by_loop, reads_kinds=True
    )
    # calls to local helpers whose summary back-propagates or steps (`train_one_epoch(model,
    # ...)`, `self.step(loss)`); calls to functions the file does not define that receive the
    # loss or the optimizer are asked about only for loops that look like evaluation
    # (`_loop_may_train`): most calls are in no such loop
    helpers = [
        call
        for call, called in calls_to_local
        if summaries.by_function[id(called)].trains
        and not any(
            step is call for step in by_function.get(_key(sem.enclosing_function(call)), ())
        )
    ]
    if helpers:
        by_function, by_loop = _with_helpers(sem, by_function, by_loop, helpers)
    mode_functions = {
        key for key, summary in summaries.by_function.items() if summary.switches_mode
    }
    facts = EvaluationFacts(
        {id(call): called for call, called in calls_to_local},
        calls_to_local,
        mode_functions,
        by_function,
        by_loop,
    )
    mode_calls = [
        call
        for name in ("eval", "train")
        for call in sem.method_calls(name)
        if mode_of_call(sem, call) is not None
    ]
    helper_calls = [call for call, called in calls_to_local if id(called) in mode_functions]
    for call in sorted([*mode_calls, *helper_calls], key=position):
        facts.mode_nodes.setdefault(id(_owner_scope(sem, call)), []).append(call)
    return facts


def _block_training(sem: Semantics, block: BlockIndex) -> list[ast.AST]:
    """The block's backward, optimizer step and autograd.grad calls, in source order."""
    qualnames = sem.qualnames_of(block)
    nodes: list[ast.AST] = [
        call for call in block.calls_by_attr.get("backward", ()) if is_backward_call(sem, call)
    ]
    nodes.extend(qualnames.get("torch.autograd.backward", ()))
    nodes.extend(
        call for call in block.calls_by_attr.get("step", ()) if is_optimizer_step(sem, call)
    )
    nodes.extend(qualnames.get("torch.autograd.grad", ()))
    nodes.sort(key=position)
    return nodes


def training_by_function(sem: Semantics, block: BlockIndex) -> dict[int, list[ast.AST]]:
    found: dict[int, list[ast.AST]] = {}
    for node in sem.block_fact(block, "evaluation:training", _block_training, sem.kinds):
        found.setdefault(_key(sem.enclosing_function(node)), []).append(node)
    return found


def training_by_loop(sem: Semantics, block: BlockIndex) -> dict[int, list[ast.AST]]:
    found: dict[int, list[ast.AST]] = {}
    for node in sem.block_fact(block, "evaluation:training", _block_training, sem.kinds):
        for loop in sem.enclosing_loops(node):
            found.setdefault(id(loop), []).append(node)
    return found


def _with_helpers(
    sem: Semantics,
    by_function: Mapping[int, list[ast.AST]],
    by_loop: Mapping[int, list[ast.AST]],
    helpers: list[ast.Call],
) -> tuple[dict[int, list[ast.AST]], dict[int, list[ast.AST]]]:
    """The groups with the calls to local training helpers put in, in source order."""
    functions = {key: list(nodes) for key, nodes in by_function.items()}
    loops = {key: list(nodes) for key, nodes in by_loop.items()}
    for call in helpers:
        _insert(functions.setdefault(_key(sem.enclosing_function(call)), []), call)
        for loop in sem.enclosing_loops(call):
            _insert(loops.setdefault(id(loop), []), call)
    return functions, loops


def _insert(nodes: list[ast.AST], node: ast.AST) -> None:
    nodes.insert(bisect_right(nodes, position(node), key=position), node)


def _key(function: Function | None) -> int:
    """A function's key in the groups by function: 0 for code outside any function."""
    return id(function) if function is not None else 0


def _find_candidates(sem: Semantics, found: list[EvaluationLoop]) -> None:
    """Loops first: a file has far fewer loops than calls. Each test is a pure condition, the
    cheap ones first: whether it trains (the training structure is built once per file),
    what the loop and its function look like, whether it calls a model."""
    training = training_of(sem)
    for loop in sem.loops:
        if training.backward_or_step_in(loop) or not _looks_like_evaluation_loop(sem, loop):
            continue
        model_calls = _model_calls_in(sem, loop)  # in source order, as `sem.calls` are
        if model_calls:
            found.append(EvaluationLoop(loop, model_calls))


def _model_calls_in(sem: Semantics, loop: Loop) -> list[ast.Call]:
    """The model calls of `training_of(sem).calls_in(loop)`, in its order, found without that
    list: of `sem.calls`, those that start in the loop's body are asked whether they call a
    model first (memoised by name), and only those climb to see that no function, class or
    lambda defined in the loop holds them. The loop is one of `sem.loops`, whose calls
    `calls_in` takes from `sem.calls`; the loops asked here are not training loops, whose
    calls other rules want, so nothing else needs the full list."""
    memo = _model_names(sem)
    kinds = sem.kinds

    def calls_a_model(call: ast.Call) -> bool:
        # `model_of` and `Semantics.dotted`, inlined, then `is_model_value` memoised by name:
        # asked of every call in the loops that look like evaluation, most of them methods of
        # a tensor or of a call's result (`x.to(device)`, `model(x).argmax(1)`)
        func = call.func
        kind = type(func)
        if kind is ast.Name:
            dotted: str | None = func.id  # type: ignore[attr-defined]  # type() tested above
        elif kind is ast.Attribute:
            receiver = func.value  # type: ignore[attr-defined]  # type() tested above
            if func.attr == "forward":  # type: ignore[attr-defined]  # type() tested above
                func = receiver
                dotted = sem.dotted(func)
            elif type(receiver) is ast.Name:
                # `x.to(device)`, `y.numel()`: the name `Semantics.dotted` spells, without its
                # memo of the node (most of these nodes are asked about here only)
                dotted = f"{receiver.id}.{func.attr}"  # type: ignore[attr-defined]  # type() tested above
                if receiver.id != "self" and kinds.get(dotted) is not ValueKind.MODEL:
                    # what `_names_model` answers for `name.attr` (not `self.attr`) needs this
                    # kind: asked first, a look-up, where the memo of names is two, and most
                    # such calls are a tensor's methods
                    return False
            elif type(receiver) is ast.Attribute:
                dotted = sem.dotted(func)
            else:
                return False  # `model(x).argmax(1)`, `(a == b).sum()`: no dotted name
        else:
            return False
        return dotted is not None and _is_model_name(sem, memo, func, dotted)

    return calls_in_body(sem.calls, sem, loop, calls_a_model)


def _owner_scope(sem: Semantics, node: ast.AST) -> ast.AST:
    """The function, class body, lambda or module whose own statements hold `node`."""
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, FUNCTION_NODES):
            return ancestor
    return sem.tree


def _looks_like_evaluation_loop(sem: Semantics, loop: Loop) -> bool:
    """The cheap tests of an evaluation loop, asked first: what the loop and its function look
    like (the rest is `_is_evaluation_loop`)."""
    if loop.body and isinstance(loop.body[-1], ast.Break):
        return False  # one pass only (`for batch in loader: model(batch); break`): a warm-up
    return _looks_like_evaluation(sem, loop)


def _is_evaluation_loop(ctx: RuleContext, facts: EvaluationFacts, loop: Loop) -> bool:
    """The rest of the tests of a loop that looks like evaluation, has no training step in
    it and calls a model. Each test is a pure condition: the cheap ones first."""
    sem = ctx.sem
    if _loop_may_train(ctx, loop):
        return False
    if _in_training_step(ctx, facts, loop) or _feeds_later_training(ctx, facts, loop):
        return False
    function = sem.enclosing_function(loop)
    if function is not None and _is_lightning_hook(sem, function):
        return False
    return function is None or not _called_in_training_step(ctx, facts, function, 0)


def _loop_may_train(ctx: RuleContext, loop: Loop) -> bool:
    """A call in the loop to a function the file does not define that receives the loss or the
    optimizer (`loss_scaler(loss, optimizer)`, `backprop(loss)`): it may back-propagate."""
    sem = ctx.sem
    summaries = summaries_of(sem)
    return any(
        id(call) not in summaries.resolved and receives_loss_or_optimizer(sem, call)
        for call in training_of(sem).calls_in(loop)
    )


CONTAINER_METHODS = frozenset({"append", "extend", "insert", "appendleft", "add", "update"})


def _feeds_later_training(ctx: RuleContext, facts: EvaluationFacts, loop: Loop) -> bool:
    """Forward now, backward later: a value the loop computes or collects reaches a training
    step (`backward()`, `autograd.grad`, a training helper) after the loop in the same function,
    so the loop's graphs are needed."""
    sem = ctx.sem
    function = sem.enclosing_function(loop)
    start = position(loop)
    later = [
        step
        for step in facts.nodes_by_function.get(_key(function), ())
        if position(step) > start and loop not in sem.enclosing_loops(step)
    ]
    if not later:
        return False
    scope: ast.AST = function if function is not None else sem.tree
    flow = flow_of(sem, scope)
    filled = _containers_filled_in(sem, loop)
    for step in later:
        pending = [(name.id, step) for name in names_with_history(step)]
        seen: set[tuple[str, int]] = set()
        while pending and len(seen) < 256:
            name, at = pending.pop()
            if (name, id(at)) in seen:
                continue
            seen.add((name, id(at)))
            definition = flow.reaching(name, at)
            if definition is None or definition.node is scope or definition.node is loop:
                continue  # a parameter, or the loop's own data (its target)
            if loop in sem.enclosing_loops(definition.node):
                return True  # bound inside the loop: `total = total + loss`
            if name in filled and definition.position < start:
                return True  # the container the loop appends its outputs to
            if definition.value is not None:
                sources = names_with_history(definition.value)
                pending.extend((source.id, definition.node) for source in sources)
    return False


def _containers_filled_in(sem: Semantics, loop: Loop) -> set[str]:
    """Names the loop stores into: `outs.append(...)`, `outs[i] = ...`."""
    names: set[str] = set()
    for node in own_nodes(loop):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in CONTAINER_METHODS and isinstance(node.func.value, ast.Name):
                names.add(node.func.value.id)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name):
                names.add(node.value.id)
    return names


def _looks_like_evaluation(sem: Semantics, loop: Loop) -> bool:
    function = sem.enclosing_function(loop)
    if function is not None and _evaluation_function_name(function.name):
        return True
    if not isinstance(loop, ast.For | ast.AsyncFor):
        return False
    # any name or attribute in the iterable (`val_loader`, `self.test_batches`, a loader); only
    # an assignment makes a name a loader (`kind_of`), so the names assigned one are asked.
    # Walked by hand, in any order (the answer is whether one matches): asked of every loop,
    # whose iterable is a few nodes, where a generator and a queue cost more than the nodes
    loaders = _loader_names(sem)
    pending: list[ast.AST] = [loop.iter]
    while pending:
        node = pending.pop()
        kind = type(node)
        if kind is ast.Name:
            name = node.id  # type: ignore[attr-defined]  # type() tested above
        elif kind is ast.Attribute:
            name = node.attr  # type: ignore[attr-defined]  # type() tested above
            pending.append(node.value)  # type: ignore[attr-defined]  # type() tested above
        else:
            pending.extend(child_nodes(node))
            continue
        if DATA_NAME.search(name) or (loaders and sem.dotted(node) in loaders):
            return True
    return False


def _loader_names(sem: Semantics) -> frozenset[str]:
    """The names this file's assignments make loaders (what `kind_of` calls a loader)."""
    whole = sem.whole
    found: frozenset[str] | None = whole.derived.get("evaluation:loader-names")
    if found is None:
        found = whole.derived["evaluation:loader-names"] = frozenset(
            name for name, kind in whole.kinds.items() if kind is ValueKind.LOADER
        )
    return found


@lru_cache(maxsize=1024)
def _evaluation_function_name(name: str) -> bool:
    """A function named for evaluation (a pure test of the name, asked for each loop)."""
    return not name.startswith("test_") and EVALUATION_FUNCTION.search(name) is not None


def _in_training_step(ctx: RuleContext, facts: EvaluationFacts, node: ast.AST) -> bool:
    """A training step (backward, step, a training helper) runs after `node` in the same
    iteration, or after it in the same function outside any loop: its outputs may be trained on."""
    sem = ctx.sem
    function = sem.enclosing_function(node)
    steps = facts.nodes_by_function.get(_key(function), ())
    if not steps:
        return False
    around = {id(loop) for loop in sem.enclosing_loops(node)}
    where = position(node)
    for step in steps:
        if position(step) <= where:
            continue
        loops = sem.enclosing_loops(step)
        if not loops or id(loops[0]) in around:
            return True
    return False


def _called_in_training_step(
    ctx: RuleContext, facts: EvaluationFacts, function: Function, depth: int
) -> bool:
    if depth > 3:
        return False
    for call in call_sites(ctx, facts, function):
        if _in_training_step(ctx, facts, call):
            return True
        caller = ctx.sem.enclosing_function(call)
        if caller is not None and caller is not function:
            if _called_in_training_step(ctx, facts, caller, depth + 1):
                return True
    return False


def call_sites(ctx: RuleContext, facts: EvaluationFacts, function: Function) -> list[ast.Call]:
    if isinstance(ctx.sem.parent(function), ast.ClassDef):
        return _method_call_sites(ctx.sem, facts).get(id(function), [])
    return ctx.sem.whole.calls_by_name.get(function.name, [])


def _method_call_sites(sem: Semantics, facts: EvaluationFacts) -> dict[int, list[ast.Call]]:
    """Per method (by id), the calls that run it: `x.name(...)` when one method of the file has
    that name, else `self.name(...)` inside its own class. One pass over the calls, so that a
    method name shared by many classes (`evaluate`) does not make every class scan them all."""
    cached: dict[int, list[ast.Call]] | None = sem.derived.get("evaluation:method-call-sites")
    if cached is not None:
        return cached
    methods: dict[tuple[int, str], Function] = {}
    for function in sem.functions:
        owner = sem.parent(function)
        if isinstance(owner, ast.ClassDef):
            methods[(id(owner), function.name)] = function
    sites: dict[int, list[ast.Call]] = {}
    for call in sem.calls:
        target = facts.resolved.get(id(call))
        func = call.func
        if target is None and (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
        ):
            caller = sem.enclosing_function(call)
            cls = sem.parent(caller) if caller is not None else None
            if isinstance(cls, ast.ClassDef):
                target = methods.get((id(cls), func.attr))
        if target is not None and isinstance(sem.parent(target), ast.ClassDef):
            sites.setdefault(id(target), []).append(call)
    sem.derived["evaluation:method-call-sites"] = sites
    return sites


def _is_lightning_hook(sem: Semantics, function: Function) -> bool:
    """Lightning runs these under no_grad and in eval mode itself."""
    cls = sem.parent(function)
    if not isinstance(cls, ast.ClassDef) or not LIGHTNING_HOOKS.match(function.name):
        return False
    return cls.name in sem.module_classes


def grad_mode_at(sem: Semantics, node: ast.AST) -> str | None:
    """ "off" under no_grad/inference_mode, "managed" under set_grad_enabled(x)/enable_grad."""
    # a plain climb with exact type tests (the parser makes no subclasses): asked of the model
    # calls of every evaluation loop, through their expressions and statements
    parents = sem.parents
    ancestor = parents.get(node)
    while ancestor is not None:
        kind = type(ancestor)
        if kind is ast.With or kind is ast.AsyncWith:
            for item in ancestor.items:  # type: ignore[attr-defined]  # type() tested above
                if sem.is_no_grad_context(item.context_expr):
                    return "off"
                if _is_grad_manager(sem, item.context_expr):
                    return "managed"
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            for decorator in ancestor.decorator_list:  # type: ignore[attr-defined]  # type() tested above
                if sem.is_no_grad_context(decorator):
                    return "off"
                if _is_grad_manager(sem, decorator):
                    return "managed"
            summary = summaries_of(sem).of(ancestor)  # type: ignore[arg-type]  # type() tested above
            if summary is not None and summary.runs_without_grad:
                return "off"  # a decorator of this file that wraps the call in no_grad
            return None
        elif kind is ast.ClassDef or kind is ast.Lambda:
            return None
        ancestor = parents.get(ancestor)
    return None


def _is_grad_manager(sem: Semantics, expr: ast.AST) -> bool:
    target = expr.func if isinstance(expr, ast.Call) else expr
    name = sem.qualname(target)
    if name is None:
        return False
    if name.endswith("inference_mode") or name.endswith("no_grad"):
        return True  # inference_mode(flag) with a non-constant flag
    return name in GRAD_MANAGERS


@dataclass(frozen=True)
class ModeEvent:
    node: ast.AST  # the `.eval()`/`.train()` call, or the call to a helper that makes one
    mode: str  # "eval" | "train" | "managed"
    receiver: str | None


def mode_of_call(sem: Semantics, call: ast.Call) -> str | None:
    mode = spelt_mode(call)
    if mode is None or not is_mode_switch(sem, call):
        return None  # also the train()/eval() of a schedule-free optimizer
    return mode


def spelt_mode(call: ast.Call) -> str | None:
    """The mode an `.eval()`/`.train(...)` call's own arguments ask for ("eval", "train", or
    "managed" for a mode computed at run time), before whether its receiver is a module is
    asked (`mode_of_call`); None for any other call."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    if func.attr == "eval" and not call.args and not call.keywords:
        return "eval"
    if func.attr != "train":
        return None
    # the first positional argument, else the `mode=` keyword: read without a generator (asked
    # of every `.train(...)` call of a file, most of them without arguments)
    if call.args:
        value: ast.expr | None = call.args[0]
    else:
        value = None
        for keyword in call.keywords:
            if keyword.arg == "mode":
                value = keyword.value
                break
        if value is None:
            return "train"
    if isinstance(value, ast.Constant):
        return "train" if value.value else "eval"
    return "managed"


def mode_events_in(ctx: RuleContext, scope: ast.AST, depth: int = 0) -> list[ModeEvent]:
    """Mode changes made by the statements of a function (helpers it calls count at the call)."""
    sem = ctx.sem
    key = f"evaluation:modes:{id(scope)}"
    cached: list[ModeEvent] | None = sem.derived.get(key)
    if cached is not None:
        return cached
    sem.derived[key] = []  # recursion guard
    events: list[ModeEvent] = []
    facts = facts_of(ctx)
    for node in facts.mode_nodes.get(id(scope), []):
        mode = mode_of_call(sem, node)
        # a mode switch is an attribute call (`model.eval()`): the check only narrows the type
        if mode is not None and isinstance(node.func, ast.Attribute):
            events.append(ModeEvent(node, mode, sem.dotted(node.func.value)))
            continue
        called = facts.resolved.get(id(node))
        if called is None or id(called) not in facts.mode_functions:
            continue
        if called is not scope and depth < 3:
            inner = mode_events_in(ctx, called, depth + 1)
            if inner:
                last = inner[-1]
                events.append(ModeEvent(node, last.mode, map_receiver(sem, node, called, last)))
    events.sort(key=lambda event: position(event.node))
    sem.derived[key] = events
    return events


def map_receiver(
    sem: Semantics, call: ast.Call, function: Function, event: ModeEvent
) -> str | None:
    """The caller's name for the model a helper switches: a parameter, or the same `self.x`."""
    receiver = event.receiver
    if receiver is None:
        return None
    if receiver.startswith("self."):
        return receiver
    head, _, rest = receiver.partition(".")
    arguments = [*function.args.posonlyargs, *function.args.args]
    offset = 1 if isinstance(sem.parent(function), ast.ClassDef) else 0
    for index, argument in enumerate(arguments[offset:]):
        if argument.arg == head and index < len(call.args):
            outer = sem.dotted(call.args[index])
            return f"{outer}.{rest}" if outer and rest else outer
    for keyword in call.keywords:
        if keyword.arg == head:
            outer = sem.dotted(keyword.value)
            return f"{outer}.{rest}" if outer and rest else outer
    return None


def scope_of(sem: Semantics, node: ast.AST) -> ast.AST:
    return sem.enclosing_function(node) or sem.tree


def mode_events_inside(ctx: RuleContext, loop: Loop) -> list[ModeEvent]:
    sem = ctx.sem
    inside: list[ModeEvent] = []
    for event in mode_events_in(ctx, scope_of(sem, loop)):
        if loop in sem.enclosing_loops(event.node):
            inside.append(event)
    return inside


@dataclass(frozen=True)
class TrainingAfter:
    """The loop that keeps training after an eval() and the first training step in it."""

    loop: Loop
    step: ast.AST


def training_after(ctx: RuleContext, node: ast.AST, model: str) -> TrainingAfter | None:
    """The innermost loop around `node` that also trains, when nothing in it calls train()."""
    sem = ctx.sem
    facts = facts_of(ctx)
    for loop in sem.enclosing_loops(node):
        if not facts.trains_in(loop):
            continue
        steps = facts.nodes_by_loop.get(id(loop), [])
        if not steps:
            continue
        if any(event.mode != "eval" for event in mode_events_inside(ctx, loop)):
            return None  # train() (or a mode the code computes) inside the loop
        return TrainingAfter(loop, steps[0])
    return None


def restore_edit(ctx: RuleContext, after: TrainingAfter, model: str) -> Edit | None:
    """`model.train()` before the first training step of the loop's iteration."""
    sem = ctx.sem
    loops = sem.enclosing_loops(after.step)
    index = loops.index(after.loop)
    if index > 0:
        target: ast.stmt | None = loops[index - 1]
    elif isinstance(after.step, ast.Call) and _is_helper_call(ctx, after.step):
        target = sem.enclosing_statement(after.step)
    else:
        target = after.loop.body[0]
    if target is None or not ctx.starts_its_line(target):
        return None
    if ctx.doc.span_of(target).start_line == after.loop.lineno - 1:
        return None
    return ctx.insert_line_before(target, f"{model}.train()")


def _is_helper_call(ctx: RuleContext, call: ast.Call) -> bool:
    return id(call) in facts_of(ctx).resolved
