"""TD403 train-mode-not-restored: model.eval() inside a loop that trains again later, with no
model.train() to switch back."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ...context import RuleContext
from ...file_facts import file_fact
from ...findings import Finding, Fix, Severity, rule
from ...function_body import own_nodes
from ...semantics import Function, Loop, Semantics, ValueKind
from ...summaries import local_calls_of, summaries_of
from ...training import exits_after, training_of
from ...tree_walk import walk
from ._shared import (
    ModeEvent,
    TrainingAfter,
    facts_of,
    grad_mode_at,
    mode_events_in,
    mode_of_call,
    model_of,
    restore_edit,
    spelt_mode,
    training_after,
)

# models that are not trained where they are called
FROZEN_NAME = re.compile(r"teacher|ema|target|frozen|ref|pretrained|reward|critic_target", re.I)


@rule(
    "TD403",
    "train-mode-not-restored",
    Severity.WARNING,
    "model.eval() inside a loop that trains again later, with no model.train() to switch back.",
    fixable=True,
    # every finding is at an eval-mode event: an `.eval()`/`.train(...)` call, or a call of a
    # helper that makes one (`_eval_events` stops first on a file without such a method call)
    spells=("eval", "train"),
)
def train_mode_not_restored(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    reported: set[tuple[int, str]] = set()
    for event in _eval_events(ctx):
        model = event.receiver
        if model is None or FROZEN_NAME.search(model.rsplit(".", 1)[-1]):
            continue
        after = training_after(ctx, event.node, model)
        if after is None or (id(after.loop), model) in reported:
            continue
        if _rebound_each_iteration(after.loop, model):
            continue  # `for model in models:` trains the next model, not this one
        statement = sem.enclosing_statement(event.node)
        if statement is not None and exits_after(sem, statement):
            continue
        if not _is_trained(ctx, model, after):
            continue
        reported.add((id(after.loop), model))
        helper = isinstance(event.node, ast.Call) and mode_of_call(sem, event.node) is None
        how = "call leaves" if helper else "puts"
        message = (
            f"this {how} `{model}` in eval mode inside a loop that trains it again on the next "
            f"iteration, and nothing in the loop calls `{model}.train()`: from then on dropout "
            "is off and batch norm stops updating its statistics during training; call "
            f"`{model}.train()` before the training step"
        )
        fix = None
        edit = restore_edit(ctx, after, model)
        if edit is not None:
            fix = Fix(f"Call `{model}.train()` before the training step", (edit,))
        yield ctx.finding("TD403", event.node, message, fix)


def _rebound_each_iteration(loop: Loop, model: str) -> bool:
    """The loop's own target binds the model: every iteration works on another object."""
    if not isinstance(loop, ast.For | ast.AsyncFor):
        return False
    head = model.split(".", 1)[0]
    return any(isinstance(n, ast.Name) and n.id == head for n in walk(loop.target))


def _eval_events(ctx: RuleContext) -> Iterator[ModeEvent]:
    sem = ctx.sem
    switches = sem.whole.calls_by_attr
    if "eval" not in switches and "train" not in switches:
        return  # every event is an `.eval()`/`.train()` call, or a call of a helper making one
    if not _switches_inside_a_loop(sem):
        return  # an event outside every loop leaves no loop to train again after it
    mode_functions = facts_of(ctx).mode_functions
    scopes: list[ast.AST] = [sem.tree, *(f for f in sem.functions if id(f) in mode_functions)]
    for scope in scopes:
        for event in mode_events_in(ctx, scope):
            if event.mode == "eval":
                yield event


def _switches_inside_a_loop(sem: Semantics) -> bool:
    """A switch to eval mode (`.eval()`, `.train(False)`), or a call of a local function that
    switches a mode, lies inside a loop: what any event the rule reports on is (see
    `training_after`). Asked of the whole file, as the events are; before the file's evaluation
    facts, which most files then never need (their `.train()` calls switch to train mode)."""
    whole = sem.whole
    for name in ("eval", "train"):
        for call in whole.method_calls(name):
            # the call's own syntax first: most `.train()` calls switch to train mode
            if (
                spelt_mode(call) == "eval"
                and whole.enclosing_loops(call)
                and mode_of_call(whole, call) == "eval"
            ):
                return True
    # the local calls in a loop first, without the summaries: most files make none
    called_in_loops = [
        called for call, called in local_calls_of(whole) if whole.enclosing_loops(call)
    ]
    if not called_in_loops:
        return False
    summaries = summaries_of(whole)
    return any(summaries.by_function[id(called)].switches_mode for called in called_in_loops)


def _is_trained(ctx: RuleContext, model: str, after: TrainingAfter) -> bool:
    """The model the loop switches is one it trains: called there with autograd on, handed to a
    training helper, given to an optimizer, or put in train mode somewhere in the file."""
    sem = ctx.sem
    if model in _models_trained_somewhere(sem):
        return True
    facts = facts_of(ctx)
    for call in training_of(sem).calls_in(after.loop):
        if sem.dotted(model_of(call)) == model and grad_mode_at(sem, call) is None:
            return True
        if not facts.is_training_node(sem, call):
            continue
        if any(sem.dotted(argument) == model for argument in call.args):
            return True
        helper = facts.resolved.get(id(call))
        if helper is not None and model.startswith("self.") and _runs_model(ctx, helper, model):
            return True
    return False


@file_fact("trained-models")
def _trained_models_fact(ctx: RuleContext) -> object:
    return frozenset(_models_trained_somewhere(ctx.sem))


def _models_trained_somewhere(sem: Semantics) -> set[str]:
    """Models the file puts in train mode or hands to an optimizer: one pass, memoised."""
    sem = sem.whole  # a fact of the file, even for a focused view
    cached: set[str] | None = sem.derived.get("evaluation:trained-models")
    if cached is not None:
        return cached
    found: set[str] = set()
    for call in sem.method_calls("train"):
        func = call.func
        assert isinstance(func, ast.Attribute)  # Semantics.method_calls: attribute calls
        if mode_of_call(sem, call) == "train":
            found.add(sem.dotted(func.value) or "")
    for call in sem.method_calls("parameters"):
        func = call.func
        assert isinstance(func, ast.Attribute)  # Semantics.method_calls: attribute calls
        owner = sem.parent(call)
        if isinstance(owner, ast.Call) and sem.kind_of(owner.func) is not ValueKind.MODEL:
            if "optim" in (sem.qualname(owner.func) or ""):
                found.add(sem.dotted(func.value) or "")
    found.discard("")
    sem.derived["evaluation:trained-models"] = found
    return found


def _runs_model(ctx: RuleContext, function: Function, model: str) -> bool:
    """`self.model(...)` with autograd on inside a training helper method."""
    sem = ctx.sem
    for node in own_nodes(function):
        if isinstance(node, ast.Call) and sem.dotted(model_of(node)) == model:
            if grad_mode_at(sem, node) is None:
                return True
    return False
