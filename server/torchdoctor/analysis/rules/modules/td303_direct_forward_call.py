"""TD303 direct-forward-call: model.forward(x) instead of model(x): forward and backward hooks do
not run."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...context import RuleContext
from ...file_facts import file_fact
from ...findings import Edit, Finding, Fix, Severity, Span, rule
from ...semantics import Semantics, ValueKind
from .module_classes import (
    built_from,
    facts_of,
    is_module_constructor,
    is_super_call,
    self_parameter,
)


@rule(
    "TD303",
    "direct-forward-call",
    Severity.WARNING,
    "model.forward(x) instead of model(x): forward and backward hooks do not run.",
    fixable=True,
    # every finding is at a `<receiver>.forward(...)` call (`method_calls("forward")`)
    spells=("forward",),
)
def direct_forward_call(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for call in sem.method_calls("forward"):
        func = call.func
        assert isinstance(func, ast.Attribute)
        receiver = func.value
        if _is_own_forward(ctx, call, receiver):
            continue
        if not _is_module_value(ctx, receiver) or _is_estimator(ctx, receiver):
            continue
        source = ctx.doc.source_of(receiver)
        message = (
            f"`{source}.forward(...)` skips `nn.Module.__call__`: the forward pre-hooks, "
            "forward hooks and backward hooks registered on the module (yours and those "
            f"libraries install) do not run; call `{source}(...)`"
        )
        fix = None
        if _simple_receiver(receiver):
            receiver_end = ctx.doc.span_of(receiver)
            func_end = ctx.doc.span_of(func)
            dot_forward = Span(
                receiver_end.end_line, receiver_end.end_col, func_end.end_line, func_end.end_col
            )
            fix = Fix(f"Call `{source}(...)`", (Edit(dot_forward, ""),))
        yield ctx.finding("TD303", call, message, fix)


# scikit-learn style methods that nn.Module lacks: the receiver is a wrapper (skorch's
# `NeuralNet`, ...) whose own `forward(X)` batches the data and calls the module properly
ESTIMATOR_METHODS = ("fit", "partial_fit", "predict", "predict_proba")


def _is_estimator(ctx: RuleContext, receiver: ast.AST) -> bool:
    sem = ctx.sem
    dotted = sem.dotted(receiver)
    if dotted is None:
        return False
    for method in ESTIMATOR_METHODS:
        for call in sem.method_calls(method):
            func = call.func
            assert isinstance(func, ast.Attribute)
            if sem.dotted(func.value) == dotted:
                return True
    return False


def _simple_receiver(node: ast.AST) -> bool:
    return isinstance(node, ast.Name | ast.Attribute | ast.Call | ast.Subscript)


def _is_own_forward(ctx: RuleContext, call: ast.Call, receiver: ast.AST) -> bool:
    """`self.forward(x)`, `super().forward(x)`, `Base.forward(self, x)`."""
    sem = ctx.sem
    if is_super_call(receiver):
        return True
    method = sem.enclosing_function(call)
    if method is not None and isinstance(receiver, ast.Name):
        if receiver.id == self_parameter(method) and isinstance(sem.parent(method), ast.ClassDef):
            return True
    dotted = sem.dotted(receiver)
    if dotted is None:
        return False
    last = dotted.rsplit(".", 1)[-1]
    # a class, not an instance: an unbound call that passes `self` on purpose
    if dotted in facts_of(sem).local_classes:
        return True
    return last[:1].isupper() and (sem.qualname(receiver) is not None or "." not in dotted)


def _is_module_value(ctx: RuleContext, receiver: ast.AST) -> bool:
    sem = ctx.sem
    if isinstance(receiver, ast.Call):
        return is_module_constructor(ctx, receiver, stateful=False)
    dotted = sem.dotted(receiver)
    if dotted is None or sem.qualname(receiver) is not None:
        return False
    if _is_graph_module(ctx, receiver):
        return False
    if "." in dotted and not dotted.startswith("self."):
        return sem.kinds.get(dotted) is ValueKind.MODEL
    known = sem.kinds.get(dotted)
    if known is not None:
        return known is ValueKind.MODEL  # built from a module class or constructor here
    # only the name says "model" (an OpenCV `cv2.dnn` net and a camera `isp_model` have a
    # `forward` too): the file must also use it as a module, or call it by the conventional
    # name in a file that imports no other library whose networks have a `forward()`
    if sem.kind_of(receiver) is not ValueKind.MODEL:
        return False
    if dotted in _used_as_module(sem):
        return True
    return dotted in CONVENTIONAL_MODEL_NAMES and not _imports_foreign_networks(sem)


CONVENTIONAL_MODEL_NAMES = frozenset({"model", "net", "self.model", "self.net"})
# inference libraries whose network objects have a `forward()` method of their own
FOREIGN_NETWORK_PACKAGES = frozenset(
    {"cv2", "onnxruntime", "openvino", "tensorrt", "tensorflow", "keras", "paddle", "mxnet"}
)


def _imports_foreign_networks(sem: Semantics) -> bool:
    return not sem.imported_packages().isdisjoint(FOREIGN_NETWORK_PACKAGES)


# methods an nn.Module has and the other objects with a `forward()` method do not
MODULE_ONLY_METHODS = (
    "parameters",
    "named_parameters",
    "buffers",
    "named_buffers",
    "state_dict",
    "load_state_dict",
    "train",
    "eval",
    "zero_grad",
    "modules",
    "named_modules",
    "children",
    "named_children",
    "register_forward_hook",
    "register_forward_pre_hook",
    "register_full_backward_hook",
    "requires_grad_",
)


@file_fact("used-as-module")
def _used_as_module_fact(ctx: RuleContext) -> object:
    return _used_as_module(ctx.sem)


def _used_as_module(sem: Semantics) -> frozenset[str]:
    """Names and `self.` attributes this file calls nn.Module-only methods on."""
    sem = sem.whole  # a fact of the file, even for a focused view
    found = sem.derived.get("modules:used-as-module")
    if found is None:
        names: set[str] = set()
        for method in MODULE_ONLY_METHODS:
            for call in sem.method_calls(method):
                func = call.func
                assert isinstance(func, ast.Attribute)  # Semantics.method_calls: attribute calls
                dotted = sem.dotted(func.value)
                if dotted is not None:
                    names.add(dotted)
        found = sem.derived["modules:used-as-module"] = frozenset(names)
    return found


def _is_graph_module(ctx: RuleContext, receiver: ast.AST) -> bool:
    """torch.fx GraphModules: their generated forward is called directly on purpose."""
    sem = ctx.sem
    built = built_from(sem, receiver)
    if built is not None and built.startswith("torch.fx."):
        return True
    if not isinstance(receiver, ast.Name):
        return False
    function = sem.enclosing_function(receiver)
    while function is not None:
        arguments = function.args
        for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
            if argument.arg == receiver.id and argument.annotation is not None:
                annotation = sem.qualname(argument.annotation) or sem.dotted(argument.annotation)
                return annotation is not None and "GraphModule" in annotation
        function = sem.enclosing_function(function)
    return False
