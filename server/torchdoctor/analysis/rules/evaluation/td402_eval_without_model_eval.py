"""TD402 eval-without-model-eval: A model evaluated without model.eval(): dropout and batch norm
stay in training mode."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...assigned_calls import definition_of
from ...context import RuleContext
from ...findings import Finding, Fix, Severity, rule
from ...mode_layers import constructor_mode_layers
from ...semantics import Function, Loop, Semantics, position
from ._shared import (
    ModeEvent,
    call_sites,
    evaluation_candidates,
    facts_of,
    is_evaluation_loop,
    map_receiver,
    mode_events_in,
    mode_events_inside,
    mode_of_call,
    model_of,
    restore_edit,
    scope_of,
    training_after,
)


def _mode_before(ctx: RuleContext, node: ast.AST, model: str | None) -> ModeEvent | None:
    """The last mode change before `node` in its function that concerns `model`."""
    sem = ctx.sem
    where = position(node)
    last: ModeEvent | None = None
    for event in mode_events_in(ctx, scope_of(sem, node)):
        if position(event.node) >= where:
            break
        if event.mode == "train" and event.receiver is not None and model is not None:
            if event.receiver != model and not _same_model(sem, event, model):
                continue
        last = event
    return last


def _deliberate_train_mode(ctx: RuleContext, event: ModeEvent, node: ast.AST) -> bool:
    """`model.train()` right before a loop without backward, with no training step in between:
    train mode chosen for this loop on purpose (recomputing batch-norm statistics, MC dropout)."""
    sem = ctx.sem
    if not isinstance(event.node, ast.Call) or mode_of_call(sem, event.node) != "train":
        return False
    scope = sem.enclosing_function(node)
    start, end = position(event.node), position(node)
    steps = facts_of(ctx).nodes_by_function.get(id(scope) if scope else 0, ())
    return not any(start < position(step) < end for step in steps)


def _same_model(sem: Semantics, event: ModeEvent, model: str) -> bool:
    """`model.module.train()` for `model`, `self.net.train()` for `self.net`."""
    receiver = event.receiver or ""
    return receiver.startswith(model + ".") or model.startswith(receiver + ".")


def _mode_reached(ctx: RuleContext, node: ast.AST, model: str | None, depth: int) -> bool:
    """eval() (or a mode chosen by the code) is in effect at `node`, as far as we can see."""
    event = _mode_before(ctx, node, model)
    if event is not None and event.mode in ("eval", "managed"):
        return True
    if event is not None and event.mode == "train":
        return _deliberate_train_mode(ctx, event, node)
    if depth > 3:
        return False
    function = ctx.sem.enclosing_function(node)
    if function is None:
        return False
    for call in call_sites(ctx, facts_of(ctx), function):
        if ctx.sem.enclosing_function(call) is function:
            continue
        if _mode_reached(ctx, call, _map_model_to_caller(ctx, call, function, model), depth + 1):
            return True
    return False


def _map_model_to_caller(
    ctx: RuleContext, call: ast.Call, function: Function, model: str | None
) -> str | None:
    if model is None:
        return None
    return map_receiver(ctx.sem, call, function, ModeEvent(call, "eval", model)) or model


def _first_mode_layers(ctx: RuleContext, model_calls: list[ast.Call]) -> list[str]:
    """The mode-dependent layers of the first of the calls whose model the file shows them for
    (a plain loop: asked of every evaluation loop, whose calls are one or two)."""
    for call in model_calls:
        layers = _mode_layers_of_call(ctx, call)
        if layers:
            return layers
    return []


def _mode_layers_of_call(ctx: RuleContext, model_call: ast.Call) -> list[str]:
    """The dropout/batch-norm layers of the model a call runs, when the file shows how it was
    built; empty when nothing is known (then eval() may change nothing: stay quiet)."""
    definition = definition_of(ctx, model_of(model_call))
    if definition is None:
        return []
    return constructor_mode_layers(ctx.sem, definition)


@rule(
    "TD402",
    "eval-without-model-eval",
    Severity.WARNING,
    "A model evaluated without model.eval(): dropout and batch norm stay in training mode.",
    fixable=True,
    # no `spells=`: a finding needs a model call (a model known by its name or its assignment)
    # and mode layers read from open families of names (torchvision builders by prefix,
    # transformers `*Model`/`*For*` classes, `Dropout`/`BatchNorm` patterns): no finite set
)
def eval_without_model_eval(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    # what the model is made of first: most loops run a model the file only receives, and
    # then whether the loop is an evaluation loop needs no facts of the file
    for candidate in evaluation_candidates(ctx):
        loop = candidate.loop
        call = candidate.model_calls[0]
        model = sem.dotted(model_of(call))
        if _in_own_method(sem, loop, model):
            continue
        layers = _first_mode_layers(ctx, candidate.model_calls)
        if not layers or not is_evaluation_loop(ctx, candidate):
            continue
        if any(event.mode != "train" for event in mode_events_inside(ctx, loop)):
            continue
        if _mode_reached(ctx, loop, model, 0):
            continue
        name = model or "model"
        message = (
            f"`{name}` is evaluated here without `{name}.eval()`, and it holds "
            f"{_layer_list(layers)}, which act differently in training mode: dropout still "
            "drops activations at random, batch norm normalises with this batch's statistics "
            "(and updates its running averages with evaluation data, even under no_grad), so "
            f"the results are noisy and wrong; call `{name}.eval()` before the loop"
        )
        yield ctx.finding("TD402", call, message, _insert_eval_fix(ctx, loop, model))


def _layer_list(layers: list[str]) -> str:
    named = [layer if " " in layer else f"`{layer}`" for layer in layers[:4]]
    return ", ".join(named) + (" and more" if len(layers) > 4 else "")


def _in_own_method(sem: Semantics, loop: Loop, model: str | None) -> bool:
    """A module's own method running its submodules (`self.decoder(...)` in `generate`): the
    mode is the one whoever holds the module chose, and an eval() in the method would leave the
    submodule in eval mode when training resumes."""
    if model is None or not model.startswith("self."):
        return False
    function = sem.enclosing_function(loop)
    cls = sem.parent(function) if function is not None else None
    if not isinstance(cls, ast.ClassDef):
        return False
    return cls.name in sem.module_classes or any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "forward"
        for node in cls.body
    )


def _insert_eval_fix(ctx: RuleContext, loop: Loop, model: str | None) -> Fix | None:
    if model is None or not ctx.starts_its_line(loop):
        return None
    edits = [ctx.insert_line_before(loop, f"{model}.eval()")]
    restore = training_after(ctx, loop, model)
    if restore is not None:
        edit = restore_edit(ctx, restore, model)
        if edit is None:
            return None
        edits.append(edit)
    return Fix(f"Call `{model}.eval()` before the loop", tuple(edits), safe=False)
