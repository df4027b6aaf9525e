"""Example inputs: the --input grammar, inputs the model or its file gives, and inputs
inferred from the first layer (checked on the meta device).
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import sys
import textwrap
import tokenize
import types
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .companions import companion_module
from .events import ProbeFailure
from .loading import definition_line, read_source
from .user_code import UserCode, user_code_phase

INFERRED_BATCH = 8
FALLBACK_BATCH = 2


if TYPE_CHECKING:  # the same file, as the type checker sees it inside the package
    from torchdoctor.probe import input_spec
else:
    input_spec = companion_module("input_spec")
TensorSpec = input_spec.TensorSpec


def parse_input_spec(text: str) -> Any:
    """The --input grammar (input_spec.py): a CallSpec of positional and keyword values."""
    try:
        return input_spec.parse_call(text)
    except input_spec.InputSpecError as exc:
        raise ProbeFailure("usage", str(exc)) from None


def spec_text(specs: Iterable[Any]) -> str:
    return "; ".join(spec.text() for spec in specs)


def integer_high(model: Any) -> int:
    """Upper bound for random integer inputs: valid indices for every Embedding."""
    import torch

    sizes = [
        m.num_embeddings
        for m in model.modules()
        if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag))
    ]
    return min(sizes) if sizes else 2


def make_tensor(spec: Any, device: Any, high: int) -> Any:
    """Random values for a TensorSpec: its own range when it has one; else integers below
    `high`, floats from randn, bools all False."""
    import torch

    dtype = getattr(torch, spec.dtype)
    if spec.low is not None and spec.high is not None:
        if dtype.is_floating_point:
            values = torch.rand(spec.shape, device=device) * (spec.high - spec.low) + spec.low
            return values.to(dtype)
        return torch.randint(int(spec.low), int(spec.high), spec.shape, dtype=dtype, device=device)
    if spec.dtype == "bool":
        # All False: a padding mask that masks nothing (random masks can blank whole rows).
        return torch.zeros(spec.shape, dtype=dtype, device=device)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(spec.shape, dtype=dtype, device=device)
    return torch.randint(0, max(high, 1), spec.shape, dtype=dtype, device=device)


def materialize(value: Any, device: Any, high: int) -> Any:
    """Tensors for every TensorSpec inside a spec value; containers and constants kept."""
    if isinstance(value, TensorSpec):
        return make_tensor(value, device, high)
    if isinstance(value, tuple):
        return tuple(materialize(v, device, high) for v in value)
    if isinstance(value, list):
        return [materialize(v, device, high) for v in value]
    if isinstance(value, dict):
        return {k: materialize(v, device, high) for k, v in value.items()}
    return value


def chosen_from_spec(call: Any, high: int, source: str, detail: str) -> ChosenInput:
    args = materialize(call.args, "cpu", high)
    kwargs = materialize(call.kwargs, "cpu", high)
    return ChosenInput(args, kwargs, source, detail, call.text())


@dataclass
class ChosenInput:
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    source: str
    detail: str
    spec: str | None = None

    def to(self, device: Any) -> ChosenInput:
        return ChosenInput(
            move_to(self.args, device), move_to(self.kwargs, device), self.source, self.detail,
            self.spec,
        )


def move_to(value: Any, device: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple):
        return tuple(move_to(v, device) for v in value)
    if isinstance(value, list):
        return [move_to(v, device) for v in value]
    if isinstance(value, dict):
        return {k: move_to(v, device) for k, v in value.items()}
    return value


def as_call_arguments(value: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Example inputs follow Lightning/torch.export: a tuple is positional arguments, a dict is
    keyword arguments, anything else is the single argument."""
    if isinstance(value, tuple):
        return value, {}
    if isinstance(value, dict):
        return (), dict(value)
    return (value,), {}


def explicit_example(model: Any, module: types.ModuleType) -> tuple[Any, str] | None:
    """An input the code provides itself, in the documented order."""
    for owner, owner_name in ((model, type(model).__name__), (module, "the file")):
        for name in ("example_input", "example_inputs"):
            hook = getattr(owner, name, None) if owner is model else vars(owner).get(name)
            if hook is None:
                continue
            value = hook() if callable(hook) else hook
            return value, f"{name} of {owner_name}"
    array = getattr(model, "example_input_array", None)
    if array is not None:
        return array, f"example_input_array of {type(model).__name__} (Lightning)"
    with contextlib.suppress(Exception):
        # A transformers model whose inputs its config describes gets those (inferred, at
        # the probe's batch and sequence, with a mask): its dummy_inputs are 3 x 5 ids.
        known = companion_module("transformers_inputs").transformers_inputs(model, 1)
        dummy = getattr(model, "dummy_inputs", None) if known is None else None
        if isinstance(dummy, dict) and dummy:
            return dummy, f"dummy_inputs of {type(model).__name__} (Hugging Face)"
    return None


_COMMENT = re.compile(r"#\s*torchdoctor:\s*input\s*=\s*(.+?)\s*$")


def comment_input(path: str, class_name: str | None) -> tuple[str, int] | None:
    """A `# torchdoctor: input=(...)` comment: one inside the class (or right above it) wins
    over one elsewhere in the file. Returns the spec text and its line."""
    try:
        source = read_source(path)
        tree = ast.parse(source)
    except (SyntaxError, OSError, UnicodeDecodeError):
        return None
    comments: list[tuple[int, str]] = []
    with contextlib.suppress(tokenize.TokenError):
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                match = _COMMENT.match(token.string)
                if match:
                    comments.append((token.start[0], match.group(1)))
    if not comments:
        return None
    spans: dict[str, tuple[int, int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            spans[node.name] = (first, node.end_lineno or node.lineno)
    lines = source.splitlines()

    def belongs_to(line: int, span: tuple[int, int]) -> bool:
        first, last = span
        if first <= line <= last:
            return True
        # Comment lines directly above the class (or its decorators) belong to it.
        return line < first and all(
            lines[i - 1].strip().startswith("#") for i in range(line, first)
        )

    if class_name in spans:
        for line, text in comments:
            if belongs_to(line, spans[class_name]):
                return text, line
    for line, text in comments:
        if not any(belongs_to(line, span) for span in spans.values()):
            return text, line
    return None


def evaluation_order(node: ast.AST) -> Iterator[ast.AST]:
    """Nodes in the order Python evaluates them: a call comes after its arguments, an
    assignment's value before its targets; nested function bodies are skipped."""
    if isinstance(node, ast.Call):
        yield from evaluation_order(node.func)
        for arg in node.args:
            yield from evaluation_order(arg)
        for keyword in node.keywords:
            yield from evaluation_order(keyword.value)
        yield node
    elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        if node.value is not None:
            yield from evaluation_order(node.value)
    elif isinstance(node, ast.For):
        yield from evaluation_order(node.iter)
        yield node
        for statement in [*node.body, *node.orelse]:
            yield from evaluation_order(statement)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
        return
    else:
        for child in ast.iter_child_nodes(node):
            yield from evaluation_order(child)


def function_ast(function: Any) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    import inspect

    try:
        source = textwrap.dedent(inspect.getsource(function))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    first = tree.body[0] if tree.body else None
    return first if isinstance(first, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def resolve_self_expression(node: ast.AST, owner: Any, aliases: dict[str, Any]) -> Any:
    """Value of `self.a.b[0]` (or a loop variable over a module container), else None."""
    if isinstance(node, ast.Name):
        if node.id == "self":
            return owner
        return aliases.get(node.id)
    if isinstance(node, ast.Attribute):
        base = resolve_self_expression(node.value, owner, aliases)
        return getattr(base, node.attr, None) if base is not None else None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        base = resolve_self_expression(node.value, owner, aliases)
        with contextlib.suppress(Exception):
            return base[node.slice.value] if base is not None else None
    return None


def first_child(container: Any) -> Any:
    children = list(container.children())
    return children[0] if children else None


def modules_in_call_order(owner: Any, depth: int = 0) -> Iterator[Any]:
    """Leaf-ish modules in the order `owner.forward` calls them (best effort, from the AST)."""
    import torch

    if depth > 12:
        return
    containers = (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict)
    if isinstance(owner, containers):
        for child in owner.children():
            yield from expand_module(child, depth + 1)
        return
    tree = function_ast(type(owner).forward) if isinstance(owner, torch.nn.Module) else None
    if tree is None:
        return
    yield from modules_called_in(tree, owner, depth)


def modules_called_in(tree: ast.AST, owner: Any, depth: int) -> Iterator[Any]:
    import torch

    aliases: dict[str, Any] = {}
    for node in evaluation_order(tree):
        if isinstance(node, ast.For):
            iterable = node.iter
            target = node.target
            if (
                isinstance(iterable, ast.Call)
                and isinstance(iterable.func, ast.Name)
                and iterable.func.id == "enumerate"
                and iterable.args
                and isinstance(target, ast.Tuple)
                and len(target.elts) == 2
            ):
                iterable, target = iterable.args[0], target.elts[1]
            container = resolve_self_expression(iterable, owner, aliases)
            if isinstance(target, ast.Name) and isinstance(container, torch.nn.Module):
                aliases[target.id] = first_child(container)
            continue
        if not isinstance(node, ast.Call):
            continue
        called = resolve_self_expression(node.func, owner, aliases)
        if isinstance(called, torch.nn.Module):
            yield from expand_module(called, depth + 1)
        elif isinstance(called, types.MethodType) and called.__self__ is owner:
            method_tree = function_ast(called.__func__)
            if method_tree is not None:
                yield from modules_called_in(method_tree, owner, depth + 1)


def expand_module(module: Any, depth: int) -> Iterator[Any]:
    if input_candidates(module, 1):
        yield module
        return
    inner = list(modules_in_call_order(module, depth))
    if inner:
        yield from inner
        return
    for child in module.children():
        yield from expand_module(child, depth + 1)


def input_candidates(layer: Any, batch: int) -> list[tuple[list[TensorSpec], str]]:
    """Shapes a layer accepts as the model's first input, most likely first (e.g. Linear →
    (B, in_features), Conv2d → (B, C, 224, 224), Embedding → (B, T) int64)."""
    from torch import nn

    b = batch
    name = type(layer).__name__
    if isinstance(layer, nn.modules.conv._ConvNd):
        c = layer.in_channels
        dims = len(layer.kernel_size)
        if dims == 1:
            sizes: list[tuple[int, ...]] = [(128,), (1024,), (16,)]
        elif dims == 2:
            sizes = [(224, 224), (32, 32), (28, 28), (64, 64)]
        else:
            sizes = [(16, 112, 112), (8, 32, 32)]
        return [([TensorSpec((b, c, *s))], f"{name}(in_channels={c})") for s in sizes]
    if isinstance(layer, (nn.Embedding, nn.EmbeddingBag)):
        # Token ids below this layer's own size (a position table elsewhere may be smaller).
        size = layer.num_embeddings
        return [
            ([TensorSpec((b, t), "int64", 0, size)], f"{name}(num_embeddings={size})")
            for t in (16, 128)
        ]
    if isinstance(layer, nn.RNNBase):
        f, t = layer.input_size, 16
        shape: tuple[int, ...] = (b, t, f) if layer.batch_first else (t, b, f)
        return [([TensorSpec(shape)], f"{name}(input_size={f}, batch_first={layer.batch_first})")]
    if isinstance(layer, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
        d = layer.self_attn.embed_dim
        first = getattr(layer.self_attn, "batch_first", False)
        shape = (b, 16, d) if first else (16, b, d)
        specs = [TensorSpec(shape)] * (2 if isinstance(layer, nn.TransformerDecoderLayer) else 1)
        return [(specs, f"{name}(d_model={d}, batch_first={first})")]
    if isinstance(layer, (nn.TransformerEncoder, nn.TransformerDecoder)) and len(layer.layers):
        return input_candidates(layer.layers[0], batch)
    if isinstance(layer, nn.MultiheadAttention):
        e = layer.embed_dim
        shape = (b, 16, e) if layer.batch_first else (16, b, e)
        return [([TensorSpec(shape)] * 3, f"{name}(embed_dim={e})")]
    if isinstance(layer, nn.Linear):
        f = layer.in_features
        return [
            ([TensorSpec((b, f))], f"Linear(in_features={f})"),
            ([TensorSpec((b, 16, f))], f"Linear(in_features={f}) over a sequence"),
        ]
    if isinstance(layer, nn.modules.batchnorm._BatchNorm):
        c = layer.num_features
        if isinstance(layer, nn.BatchNorm1d):
            shapes: list[tuple[int, ...]] = [(b, c), (b, c, 16)]
        elif isinstance(layer, nn.BatchNorm2d):
            shapes = [(b, c, 224, 224), (b, c, 32, 32)]
        else:
            shapes = [(b, c, 16, 32, 32)]
        return [([TensorSpec(s)], f"{name}(num_features={c})") for s in shapes]
    if isinstance(layer, nn.LayerNorm):
        shape = tuple(layer.normalized_shape)
        return [
            ([TensorSpec((b, 16, *shape))], f"LayerNorm({list(shape)})"),
            ([TensorSpec((b, *shape))], f"LayerNorm({list(shape)})"),
        ]
    if isinstance(layer, nn.GroupNorm):
        c = layer.num_channels
        return [([TensorSpec((b, c, 32, 32))], f"GroupNorm(num_channels={c})")]
    return []


@contextlib.contextmanager
def parameters_on_meta(model: Any) -> Iterator[None]:
    """Swap every parameter/buffer for a meta tensor of the same shape for the duration:
    shape-checks a candidate input with no compute and no memory. (torch.func.functional_call
    would do the same but imports dynamo on first use, ~2 s.)"""
    import torch

    saved: list[tuple[dict[str, Any], str, Any]] = []
    replacements: dict[int, Any] = {}
    for module in model.modules():
        for table in (module._parameters, module._buffers):
            for name, tensor in list(table.items()):
                if tensor is None:
                    continue
                replacement = replacements.get(id(tensor))
                if replacement is None:
                    meta = torch.empty_like(tensor, device="meta")
                    if isinstance(tensor, torch.nn.Parameter):
                        meta = torch.nn.Parameter(meta, requires_grad=tensor.requires_grad)
                    replacement = replacements[id(tensor)] = meta
                saved.append((table, name, tensor))
                table[name] = replacement
    try:
        yield
    finally:
        for table, name, tensor in saved:
            table[name] = tensor


def try_input(model: Any, specs: list[TensorSpec], device: Any, high: int) -> BaseException | None:
    import torch

    args = tuple(make_tensor(spec, device, high) for spec in specs)
    try:
        with torch.no_grad(), contextlib.redirect_stdout(sys.stderr):
            if str(device) == "meta":
                with parameters_on_meta(model):
                    model(*args)
            else:
                model(*args)
    except (KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a failing candidate is an expected outcome
        return exc
    return None


def infer_transformers_input(model: Any) -> ChosenInput | None:
    """Keyword inputs a transformers model's config describes (transformers_inputs.py),
    verified like a layer's candidates; None when they do not apply or do not fit."""
    import torch

    keyword_inputs = companion_module("transformers_inputs")
    for device, batch, how in (
        (torch.device("meta"), INFERRED_BATCH, "verified on the meta device"),
        (torch.device("cpu"), FALLBACK_BATCH, "verified by a CPU run at batch 2"),
    ):
        found = keyword_inputs.transformers_inputs(model, batch)
        if found is None:
            return None
        tensors, detail = found
        call = input_spec.CallSpec(
            (), {t.name: TensorSpec(t.shape, t.dtype, t.low, t.high) for t in tensors}
        )
        kwargs = materialize(call.kwargs, device, 2)
        if try_call(model, (), kwargs, device) is None:
            chosen = chosen_from_spec(call, 2, "inferred", "")
            chosen.detail = f"{detail} -> {call.text()}, {how}"
            return chosen
    return None


def try_call(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], device: Any) -> Any:
    """None when forward accepts these arguments, else the exception it raised."""
    import torch

    try:
        with torch.no_grad(), contextlib.redirect_stdout(sys.stderr):
            if str(device) == "meta":
                with parameters_on_meta(model):
                    model(*args, **kwargs)
            else:
                model(*args, **kwargs)
    except (KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a failing candidate is an expected outcome
        return exc
    return None


def infer_input(model: Any, path: str, user: UserCode) -> ChosenInput:
    """Guess an input from the first layer `forward` uses, verified on the meta device, then
    (if the model needs real values) on the CPU at batch 2."""
    import torch

    from_config = infer_transformers_input(model)
    if from_config is not None:
        return from_config
    ordered = list(modules_in_call_order(model))
    declared = [m for m in model.modules() if input_candidates(m, 1)]
    layers: list[Any] = []
    for layer in [*ordered, *declared]:
        if all(layer is not seen for seen in layers):
            layers.append(layer)
    if not layers:
        raise ProbeFailure(
            "input",
            f"cannot guess an input for {type(model).__name__}: its first layer is not one "
            "whose input shape is known; add `# torchdoctor: input=(8, 3, 224, 224)` above "
            "the class, an `example_input()` method, or pass --input",
            path,
            definition_line(type(model), path),
        )
    high = integer_high(model)
    first_error: BaseException | None = None
    tried: list[str] = []
    for device, batch, how in (
        (torch.device("meta"), INFERRED_BATCH, "verified on the meta device"),
        (torch.device("cpu"), FALLBACK_BATCH, "verified by a CPU run at batch 2"),
    ):
        for layer in layers[:4]:
            for specs, description in input_candidates(layer, batch):
                error = try_input(model, specs, device, high)
                tried.append(spec_text(specs))
                if error is None:
                    text = spec_text(specs)
                    tensors = tuple(make_tensor(spec, "cpu", high) for spec in specs)
                    return ChosenInput(
                        tensors, {}, "inferred",
                        f"first layer {description} -> {text}, {how}", text,
                    )
                first_error = first_error or error
    where = user.innermost_in_traceback(first_error.__traceback__) if first_error else None
    reason = f"{type(first_error).__name__}: {first_error}" if first_error else ""
    raise ProbeFailure(
        "input",
        f"no guessed input fits {type(model).__name__} (tried {', '.join(dict.fromkeys(tried))}); "
        f"first failure: {reason.splitlines()[0] if reason else 'none'}; pin one with "
        "`# torchdoctor: input=(...)`, an `example_input()` method, or --input",
        where[0] if where else path,
        where[1] if where else definition_line(type(model), path),
    )


def choose_input(
    model: Any, module: types.ModuleType, path: str, cli_spec: str | None, user: UserCode
) -> ChosenInput:
    """Explicit beats guessed: --input (asked for this run), the code's own example input,
    a `# torchdoctor: input=` comment, then inference from the first layer."""
    high = integer_high(model)
    if cli_spec is not None:
        return chosen_from_spec(parse_input_spec(cli_spec), high, "argument", "given with --input")
    with user_code_phase("input", "computing the example input", user):
        provided = explicit_example(model, module)
    if provided is not None:
        value, origin = provided
        args, kwargs = as_call_arguments(value)
        return ChosenInput(args, kwargs, "example", f"from {origin}", describe_value_spec(value))
    comment = comment_input(path, type(model).__name__)
    if comment is not None:
        text, line = comment
        try:
            call = parse_input_spec(text)
        except ProbeFailure as exc:
            raise ProbeFailure("input", exc.message, path, line) from None
        return chosen_from_spec(call, high, "comment", f"from the comment on line {line}")
    return infer_input(model, path, user)


def describe_value_spec(value: Any) -> str | None:
    """The pinnable spec of an explicit input (tensors, in tuples, lists and dicts, and plain
    constants); None when it holds anything else."""
    import torch

    def spec_of(item: Any) -> Any:
        if isinstance(item, torch.Tensor):
            return TensorSpec(tuple(item.shape), str(item.dtype).removeprefix("torch."))
        if isinstance(item, (tuple, list)):
            return type(item)(spec_of(v) for v in item)
        if isinstance(item, dict) and all(isinstance(k, str) for k in item):
            return {k: spec_of(v) for k, v in item.items()}
        if item is None or isinstance(item, (bool, int, float, str)):
            return item
        raise ValueError(type(item).__name__)

    args, kwargs = as_call_arguments(value)
    try:
        return input_spec.CallSpec(spec_of(args), spec_of(kwargs)).text()
    except ValueError:
        return None
