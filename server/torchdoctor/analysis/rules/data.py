"""Rules of the data family (see DESIGN.md §3): DataLoader arguments that cannot go together,
samplers whose order never changes, and worker processes that are missing or started unsafely."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

from ..call_edits import add_keyword, remove_arguments
from ..context import RuleContext
from ..dataflow import flow_of
from ..findings import Edit, Finding, Fix, Severity, Span, rule
from ..semantics import FUNCTION_NODES, Function, Semantics
from ..training import function_scope, training_of
from .loader_workload import (
    places_items_on_device,
    pretokenized_dataset,
    small_builtin_dataset,
    tensor_dataset_value,
)

LOADER_CLASSES = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
LOADER_POSITIONAL = (
    "dataset",
    "batch_size",
    "shuffle",
    "sampler",
    "batch_sampler",
    "num_workers",
    "collate_fn",
    "pin_memory",
    "drop_last",
    "timeout",
    "worker_init_fn",
    "multiprocessing_context",
    "generator",
)
DISTRIBUTED_SAMPLERS = (
    "torch.utils.data.DistributedSampler",
    "torch.utils.data.distributed.DistributedSampler",
)
SAMPLER_POSITIONAL = ("dataset", "num_replicas", "rank", "shuffle", "seed", "drop_last")
# Builtins that iterate the loader they are given (`next(iter(loader))`, `list(loader)`).
ITERATING_BUILTINS = frozenset({"iter", "list", "tuple", "sorted"})
# Calls that take a loader without iterating it.
NON_ITERATING_CALLS = frozenset(
    {"len", "print", "isinstance", "hasattr", "getattr", "type", "str", "repr", "id", "vars"}
)
EVAL_WORDS = ("val", "valid", "validation", "test", "eval", "dev", "predict", "infer", "calib")
DEFAULT_WORKERS = 4


# ---- shared facts about calls ----------------------------------------------------------------
@dataclass(frozen=True)
class Arguments:
    """The arguments of one call bound to parameter names, like Python binds them."""

    call: ast.Call
    values: dict[str, ast.expr]
    nodes: dict[str, ast.AST]  # the keyword node, or the positional expression
    positional: frozenset[str]
    open: bool  # `*args` / `**kwargs`: parameters not bound here may still be passed

    def get(self, name: str) -> ast.expr | None:
        return self.values.get(name)

    def bound(self, name: str) -> bool:
        return name in self.values

    def unset(self, name: str) -> bool:
        """Not passed, and no `*args`/`**kwargs` could pass it."""
        return name not in self.values and not self.open


def bind_arguments(call: ast.Call, positional_names: tuple[str, ...]) -> Arguments:
    values: dict[str, ast.expr] = {}
    nodes: dict[str, ast.AST] = {}
    positional: set[str] = set()
    is_open = False
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            is_open = True
            break
        if index < len(positional_names):
            name = positional_names[index]
            values[name] = arg
            nodes[name] = arg
            positional.add(name)
    for keyword in call.keywords:
        if keyword.arg is None:
            is_open = True
            continue
        values[keyword.arg] = keyword.value
        nodes[keyword.arg] = keyword
    return Arguments(call, values, nodes, frozenset(positional), is_open)


def loader_calls(sem: Semantics) -> list[tuple[ast.Call, Arguments]]:
    """Every `torch.utils.data.DataLoader(...)` in the document, under any import alias."""
    found = sem.derived.get("data:loaders")
    if found is None:
        found = sem.derived["data:loaders"] = [
            (call, bind_arguments(call, LOADER_POSITIONAL))
            for call in sem.calls_to(*LOADER_CLASSES)
        ]
    return found


def last_name(sem: Semantics, node: ast.AST) -> str:
    """`DistributedSampler` for `torch.utils.data.DistributedSampler`; "" when not a name."""
    dotted = sem.dotted(node)
    return dotted.rsplit(".", 1)[-1] if dotted else ""


def is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def is_none(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def int_constant(node: ast.AST | None) -> int | None:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
    ):
        return node.value
    return None


def assigned_name(sem: Semantics, call: ast.Call) -> str | None:
    """`train_loader` for `train_loader = DataLoader(...)` (also `self.loader = ...`)."""
    parent = sem.parent(call)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.value is call:
        return sem.dotted(parent.targets[0])
    if isinstance(parent, ast.AnnAssign) and parent.value is call:
        return sem.dotted(parent.target)
    if isinstance(parent, ast.NamedExpr) and parent.value is call:
        return parent.target.id
    return None


def _loop_index(sem: Semantics) -> tuple[dict[int, dict[str, ast.AST]], dict[str, list]]:
    """For every `for` loop, the names in its iterable; and for every name, those loops."""
    found = sem.derived.get("data:loop_iter_names")
    if found is None:
        by_loop: dict[int, dict[str, ast.AST]] = {}
        by_name: dict[str, list[tuple[ast.For | ast.AsyncFor, ast.AST]]] = {}
        for loop in sem.loops:
            if isinstance(loop, ast.For | ast.AsyncFor):
                names: dict[str, ast.AST] = {}
                for node in ast.walk(loop.iter):
                    if isinstance(node, ast.Name | ast.Attribute):
                        name = sem.dotted(node)
                        if name is not None and name not in names:
                            names[name] = node
                            by_name.setdefault(name, []).append((loop, node))
                by_loop[id(loop)] = names
        found = sem.derived["data:loop_iter_names"] = (by_loop, by_name)
    return found


def loop_mentions(sem: Semantics, loop: ast.AST, dotted: str) -> ast.AST | None:
    """The first Name/Attribute in a `for` loop's iterable that is `dotted` (`loader`,
    `self.train_loader`), from an index built once for all loops."""
    return _loop_index(sem)[0].get(id(loop), {}).get(dotted)


def enclosing_class(sem: Semantics, node: ast.AST) -> ast.ClassDef | None:
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, ast.ClassDef):
            return ancestor
    return None


def same_binding(sem: Semantics, dotted: str, bound_at: ast.AST, used_at: ast.AST) -> bool:
    """Whether `dotted` used at `used_at` can be the value bound at `bound_at`. It depends on
    the two places only through their `binding_scope`s."""
    if dotted.startswith("self."):
        return enclosing_class(sem, bound_at) is enclosing_class(sem, used_at)
    bound_scope = scope_of(sem, bound_at)
    used_scope = scope_of(sem, used_at)
    if bound_scope is used_scope:
        return True
    if isinstance(bound_scope, ast.Module):
        # a global read from a function that does not bind the name itself
        return dotted.split(".", 1)[0] not in _names_bound_in(sem, used_scope)
    return False


def binding_scope(sem: Semantics, dotted: str, node: ast.AST) -> ast.AST | None:
    """What `same_binding` compares for `dotted` at `node`: the class for `self.x`, else the
    function (or module) holding `node`."""
    return enclosing_class(sem, node) if dotted.startswith("self.") else scope_of(sem, node)


def reaches_from_module(sem: Semantics, dotted: str, used_scope: ast.AST | None) -> bool:
    """Whether a module-level binding of `dotted` is what a use in `used_scope` (another
    scope) reads: a global read from a function that does not bind the name itself."""
    if dotted.startswith("self.") or used_scope is None:
        return False
    return dotted.split(".", 1)[0] not in _names_bound_in(sem, used_scope)


def scope_of(sem: Semantics, node: ast.AST) -> ast.AST:
    """The function holding `node`, else the module (memoised: rules ask often)."""
    memo = sem.derived.setdefault("data:scopes", {})
    scope = memo.get(id(node))
    if scope is None:
        scope = memo[id(node)] = function_scope(sem, node)
    return scope


def _names_bound_in(sem: Semantics, scope: ast.AST) -> set[str]:
    """Plain names a function binds itself (parameters, assignments, loop targets)."""
    index = sem.derived.get("data:bound_names")
    if index is None:
        index = {}
        for function in sem.functions:
            arguments = function.args
            index[id(function)] = {
                arg.arg
                for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                            arguments.vararg, arguments.kwarg]
                if arg is not None
            }
        targets: list[tuple[ast.AST, ast.AST]] = []
        for assign in sem.assigns:
            for target in assign.targets if isinstance(assign, ast.Assign) else [assign.target]:
                targets.append((assign, target))
        for loop in sem.loops:
            if isinstance(loop, ast.For | ast.AsyncFor):
                targets.append((loop, loop.target))
        for statement, target in targets:
            function = sem.enclosing_function(statement)
            if function is None:
                continue
            names = index.setdefault(id(function), set())
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    names.add(node.id)
        sem.derived["data:bound_names"] = index
    return index.get(id(scope), set())


def at_module_level(sem: Semantics, node: ast.AST) -> bool:
    return not any(isinstance(ancestor, FUNCTION_NODES) for ancestor in sem.ancestors(node))


def is_main_guard(test: ast.AST) -> bool:
    """`__name__ == "__main__"` (either way round)."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or not isinstance(
        test.ops[0], ast.Eq
    ):
        return False
    sides = (test.left, test.comparators[0])
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides
    )


def in_main_guard(sem: Semantics, node: ast.AST) -> bool:
    child = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, ast.If) and is_main_guard(ancestor.test) and child in ancestor.body:
            return True
        child = ancestor
    return False


def top_level_statement(sem: Semantics, node: ast.AST) -> ast.stmt | None:
    current: ast.AST = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, ast.Module):
            return current if isinstance(current, ast.stmt) else None
        current = ancestor
    return None


def module_functions(sem: Semantics) -> dict[str, Function]:
    """Functions defined at module level (outside classes), by name."""
    found = sem.derived.get("data:module_functions")
    if found is None:
        found = {}
        for function in sem.functions:
            if at_module_level(sem, function):
                found[function.name] = function
        sem.derived["data:module_functions"] = found
    return found


def methods_of(cls: ast.ClassDef) -> dict[str, Function]:
    return {
        node.name: node
        for node in cls.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def class_of_instance(sem: Semantics, name: str, at: ast.AST) -> ast.ClassDef | None:
    """The local class `name` was built from (`trainer = Trainer(...)`), when it was."""
    definition = flow_of(sem, function_scope(sem, at)).reaching(name, at)
    if definition is None or not isinstance(definition.value, ast.Call):
        return None
    constructor = definition.value.func
    if not isinstance(constructor, ast.Name):
        return None
    for cls in sem.classes:
        if cls.name == constructor.id and at_module_level(sem, cls):
            return cls
    return None


def parameter_names(function: Function) -> list[str]:
    arguments = function.args
    return [arg.arg for arg in [*arguments.posonlyargs, *arguments.args]]


# ---- what a sampler argument holds -----------------------------------------------------------
class Presence(str, Enum):
    """Whether an argument's value is a real object, None, either, or unknown."""

    SET = "set"
    NONE = "none"
    MAYBE = "maybe"  # a sampler on one path, None on another
    UNKNOWN = "unknown"


def sampler_presence(sem: Semantics, expr: ast.AST | None, at: ast.AST, depth: int = 0) -> Presence:
    """Whether a `sampler=`/`batch_sampler=` value is certainly a sampler, None, or either."""
    if expr is None or is_none(expr):
        return Presence.NONE
    if depth > 3:
        return Presence.UNKNOWN
    if isinstance(expr, ast.Call):
        name = last_name(sem, expr.func)
        return Presence.SET if "Sampler" in name else Presence.UNKNOWN
    if isinstance(expr, ast.List | ast.Tuple | ast.ListComp):
        return Presence.SET
    if isinstance(expr, ast.IfExp):
        branches = {
            sampler_presence(sem, expr.body, at, depth + 1),
            sampler_presence(sem, expr.orelse, at, depth + 1),
        }
        if branches == {Presence.SET}:
            return Presence.SET
        if branches == {Presence.SET, Presence.NONE}:
            return Presence.MAYBE
        return Presence.UNKNOWN
    dotted = sem.dotted(expr)
    if dotted is None:
        return Presence.UNKNOWN
    flow = flow_of(sem, function_scope(sem, at))
    definitions = [
        d for d in flow.definitions.get(dotted, []) if d.position < (at.lineno, at.col_offset)
    ]
    if definitions:
        last = definitions[-1]
        if not isinstance(last.node, ast.Assign | ast.AnnAssign) or last.value is None:
            return Presence.UNKNOWN
        value = sampler_presence(sem, last.value, last.node, depth + 1)
        if value is not Presence.SET or _unconditional_before(sem, last.node, at):
            return value
        earlier = [d.value for d in definitions[:-1]]
        if any(is_none(v) for v in earlier):
            return Presence.MAYBE
        return Presence.UNKNOWN
    if "." in dotted:
        # `self.sampler`, bound in another method: every assignment in the file decides
        values = [_assigned_value(assign) for assign in _assignments_to(sem, dotted)]
        kinds = {sampler_presence(sem, v, v, depth + 1) if v is not None else Presence.UNKNOWN
                 for v in values}
        if kinds == {Presence.SET}:
            return Presence.SET
        if kinds and kinds <= {Presence.SET, Presence.NONE} and Presence.SET in kinds:
            return Presence.MAYBE
    return Presence.UNKNOWN


def _assignments_to(sem: Semantics, dotted: str) -> list[ast.Assign | ast.AnnAssign]:
    """Every `dotted = ...` in the file, from an index built once."""
    index = sem.derived.get("data:assignments")
    if index is None:
        index = {}
        for assign in sem.assigns:
            if isinstance(assign, ast.Assign):
                targets = assign.targets
            elif isinstance(assign, ast.AnnAssign):
                targets = [assign.target]
            else:
                continue
            for target in targets:
                name = sem.dotted(target)
                if name is not None:
                    index.setdefault(name, []).append(assign)
        sem.derived["data:assignments"] = index
    return index.get(dotted, [])


def _assigned_value(assign: ast.Assign | ast.AnnAssign) -> ast.expr | None:
    return assign.value


def _unconditional_before(sem: Semantics, definition: ast.AST, use: ast.AST) -> bool:
    """True when every branch and loop around `definition` also holds `use`."""
    use_ancestors = {id(node) for node in sem.ancestors(use)}
    for ancestor in sem.ancestors(definition):
        if isinstance(ancestor, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
            return True
        if isinstance(ancestor, ast.If | ast.For | ast.AsyncFor | ast.While | ast.Try | ast.Match):
            if id(ancestor) not in use_ancestors:
                return False
    return True


# ---- where a loader is iterated ----------------------------------------------------------------
@dataclass(frozen=True)
class IterationSite:
    node: ast.AST  # what to point at: the loader inside a loop header, or the iterating call
    loop: ast.For | ast.AsyncFor | None  # the loop that walks the loader, when there is one


def iteration_sites(sem: Semantics, dotted: str, bound_at: ast.AST) -> list[IterationSite]:
    """Loops over `dotted` (`for b in loader`, `enumerate(tqdm(loader))`) and `iter(loader)`."""
    bound_scope = binding_scope(sem, dotted, bound_at)
    key = f"data:sites:{dotted}:{id(bound_scope)}"
    found = sem.derived.get(key)
    if found is not None:
        return found
    by_scope = _sites_by_scope(sem, dotted)
    if isinstance(bound_scope, ast.Module) and not dotted.startswith("self."):
        chosen = [
            entry
            for used_scope, entries in by_scope.items()
            if used_scope is bound_scope or reaches_from_module(sem, dotted, used_scope)
            for entry in entries
        ]
    else:
        chosen = list(by_scope.get(bound_scope, []))
    # in source order; the index of a site keeps the order of sites at the same place
    chosen.sort(key=lambda entry: (entry[1].node.lineno, entry[1].node.col_offset, entry[0]))  # type: ignore[attr-defined]
    found = [site for _, site in chosen]
    sem.derived[key] = found
    return found


def _sites_by_scope(
    sem: Semantics, dotted: str
) -> dict[ast.AST | None, list[tuple[int, IterationSite]]]:
    """Every place `dotted` is iterated, grouped by the `binding_scope` of the place and
    numbered in the order found, built once per name: asking each binding of a name shared by
    many functions (`train_loader`) to scan every loop over that name would be quadratic."""
    index = sem.derived.setdefault("data:sites_by_scope", {})
    found = index.get(dotted)
    if found is not None:
        return found
    found = index[dotted] = {}
    places: list[tuple[ast.AST, IterationSite]] = [
        (loop, IterationSite(node, loop)) for loop, node in _loop_index(sem)[1].get(dotted, [])
    ]
    for call in _calls_passing(sem, dotted):
        func = call.func
        if (
            isinstance(func, ast.Name)
            and func.id in ITERATING_BUILTINS
            and call.args
            and sem.dotted(call.args[0]) == dotted
            and not _inside_loop_header(sem, call)
        ):
            places.append((call, IterationSite(call, None)))
    for number, (place, site) in enumerate(places):
        found.setdefault(binding_scope(sem, dotted, place), []).append((number, site))
    return found


def _calls_of_builtin(sem: Semantics, name: str) -> list[ast.Call]:
    index = sem.derived.get("data:name_calls")
    if index is None:
        index = {}
        for call in sem.calls:
            if isinstance(call.func, ast.Name):
                index.setdefault(call.func.id, []).append(call)
        sem.derived["data:name_calls"] = index
    return index.get(name, [])


def calls_by_name(sem: Semantics, name: str) -> list[ast.Call]:
    """Calls of a plain name (`train(...)`), from one shared index."""
    return _calls_of_builtin(sem, name)


def _inside_loop_header(sem: Semantics, node: ast.AST) -> bool:
    child = node
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, ast.For | ast.AsyncFor) and child is ancestor.iter:
            return True
        if isinstance(ancestor, ast.stmt):
            return False
        child = ancestor
    return False


# ---- which loaders train -----------------------------------------------------------------------
NOT_LETTERS = re.compile(r"[^a-z]+")


def _words(name: str) -> list[str]:
    return [word for word in NOT_LETTERS.split(name.lower()) if word]


def _is_eval_name(name: str) -> bool:
    return any(word in EVAL_WORDS or word.startswith(("val", "test", "eval")) for word in
               _words(name))


def _is_train_name(name: str) -> bool:
    return any(word.startswith("train") for word in _words(name))


def _dataset_value(sem: Semantics, args: Arguments) -> ast.expr | None:
    """The dataset expression, or the value its name was assigned from in this scope."""
    dataset = args.get("dataset")
    if isinstance(dataset, ast.Name | ast.Attribute):
        dotted = sem.dotted(dataset)
        if dotted is not None:
            definition = flow_of(sem, function_scope(sem, args.call)).reaching(dotted, args.call)
            if definition is not None and definition.value is not None:
                return definition.value
            if definition is None and isinstance(dataset, ast.Name):
                return _global_value(sem, dataset.id, args.call) or dataset
    return dataset


def _global_value(sem: Semantics, name: str, at: ast.AST) -> ast.expr | None:
    """The value of a global a function reads without binding it: the one module-level
    assignment to it (several, or none: unknown)."""
    if isinstance(scope_of(sem, at), ast.Module) or name in _names_bound_in(sem, scope_of(sem, at)):
        return None
    assigns = [
        assign for assign in _assignments_to(sem, name)
        if isinstance(sem.parent(assign), ast.Module)
    ]
    return assigns[0].value if len(assigns) == 1 else None


def _split_of(value: ast.AST | None) -> str | None:
    """"train"/"eval" from `MNIST(..., train=True)` or `load_dataset(..., split="test")`."""
    if not isinstance(value, ast.Call):
        return None
    for keyword in value.keywords:
        if keyword.arg == "train" and isinstance(keyword.value, ast.Constant):
            return "train" if keyword.value.value is True else "eval"
        if keyword.arg in ("split", "subset", "mode") and isinstance(keyword.value, ast.Constant):
            text = str(keyword.value.value)
            if _is_train_name(text):
                return "train"
            if _is_eval_name(text):
                return "eval"
    return None


def loader_names(sem: Semantics, call: ast.Call, args: Arguments) -> list[str]:
    """Names that say what a loader is for: its variable, its dataset, the function making it."""
    names: list[str] = []
    handle = assigned_name(sem, call)
    if handle is not None:
        names.append(handle.rsplit(".", 1)[-1])
    dataset = args.get("dataset")
    if dataset is not None:
        dotted = sem.dotted(dataset)
        if dotted is not None:
            names.append(dotted.rsplit(".", 1)[-1])
    parent = sem.parent(call)
    if isinstance(parent, ast.Return):
        function = sem.enclosing_function(call)
        if function is not None:
            names.append(function.name)
    return names


def _is_eval_loader(sem: Semantics, call: ast.Call, args: Arguments) -> bool:
    if _split_of(_dataset_value(sem, args)) == "eval":
        return True
    return any(_is_eval_name(name) for name in loader_names(sem, call, args))


def feeds_backward(sem: Semantics, call: ast.Call) -> bool:
    """The loader is walked by a loop that calls `.backward()`."""
    handle = assigned_name(sem, call)
    if handle is None:
        return False
    loops = sem.derived.get("data:backward_loops")
    if loops is None:
        loops = sem.derived["data:backward_loops"] = training_of(sem).loops_with_backward()
    for loop in loops:
        if loop_mentions(sem, loop, handle) and same_binding(sem, handle, call, loop):
            return True
    return False


def is_training_loader(sem: Semantics, call: ast.Call, args: Arguments) -> bool:
    """Clearly a training loader: it feeds a backward loop, is named or built for training, or
    shuffles. A loader named or built for validation or testing never counts."""
    names = loader_names(sem, call, args)
    split = _split_of(_dataset_value(sem, args))
    if split == "eval" or any(_is_eval_name(name) for name in names):
        return False
    if feeds_backward(sem, call) or split == "train":
        return True
    if any(_is_train_name(name) for name in names):
        return True
    return is_true(args.get("shuffle"))


def indent_unit(ctx: RuleContext) -> str:
    """The file's own indentation step (four spaces when it has no indented line)."""
    for line in ctx.doc.index.lines:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line and not stripped.startswith("#"):
            prefix = line[: len(line) - len(stripped)]
            return "\t" if prefix.startswith("\t") else prefix
    return "    "


STRING_OR_COMMENT = re.compile(
    r"#[^\r\n]*|(\"\"\"|\'\'\')|\"(?:\\.|[^\"\\\r\n])*\"|'(?:\\.|[^'\\\r\n])*'"
)


def lines_inside_strings(text: str) -> set[int]:
    """0-based numbers of the lines of `text` that start inside a triple-quoted string."""
    inside: set[int] = set()
    position = 0
    while True:
        match = STRING_OR_COMMENT.search(text, position)
        if match is None:
            return inside
        if match.group(1) is None:
            position = match.end()
            continue
        quote = match.group(1)
        end = match.end()
        while True:
            end = text.find(quote, end)
            if end < 0:
                end = len(text)
                break
            backslashes = len(text[:end]) - len(text[:end].rstrip("\\"))
            if backslashes % 2 == 0:
                break
            end += 1
        first = text.count("\n", 0, match.start())
        last = first + text.count("\n", match.start(), end)
        inside.update(range(first + 1, last + 1))
        position = end + len(quote)


def indent_lines(ctx: RuleContext, first_line: int, last_line: int, unit: str) -> list[Edit]:
    """Edits that indent lines first..last by `unit`, leaving blank lines and the inside of
    multi-line strings alone."""
    doc = ctx.doc
    text = "\n".join(doc.index.line(n) for n in range(first_line, last_line + 1))
    inside_strings = {first_line + line for line in lines_inside_strings(text)}
    edits: list[Edit] = []
    for line in range(first_line, last_line + 1):
        if line in inside_strings or not doc.index.line(line).strip():
            continue
        edits.append(Edit(Span(line, 0, line, 0), unit))
    return edits


# ---- TD501 ---------------------------------------------------------------------------------
@rule(
    "TD501",
    "shuffle-with-sampler",
    Severity.ERROR,
    "DataLoader(shuffle=True, sampler=...) raises: the sampler already decides the order.",
    fixable=True,
)
def shuffle_with_sampler(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for call, args in loader_calls(sem):
        shuffle = args.get("shuffle")
        if not is_true(shuffle):
            continue
        sampler = args.get("sampler")
        presence = sampler_presence(sem, sampler, call)
        shuffle_node = args.nodes["shuffle"]
        if presence is Presence.SET:
            message = (
                "`shuffle=True` together with `sampler=` raises \"ValueError: sampler option is "
                "mutually exclusive with shuffle\": the sampler decides the order (shuffle "
                "inside the sampler, e.g. `RandomSampler` or `DistributedSampler(shuffle=True)`)"
            )
            yield ctx.finding("TD501", shuffle_node, message, _drop_shuffle_fix(ctx, call, args))
        elif presence is Presence.MAYBE and sampler is not None:
            name = ctx.doc.source_of(sampler)
            message = (
                f"`shuffle=True` raises \"ValueError: sampler option is mutually exclusive with "
                f"shuffle\" whenever `{name}` is not None; shuffle only when there is no "
                f"sampler: `shuffle=({name} is None)`"
            )
            fix = Fix(
                f"Shuffle only when `{name}` is None",
                (ctx.replace(shuffle, f"({name} is None)"),),
            )
            yield ctx.finding("TD501", shuffle_node, message, fix)


def _drop_shuffle_fix(ctx: RuleContext, call: ast.Call, args: Arguments) -> Fix | None:
    if "shuffle" in args.positional:
        return Fix(
            "Pass `False` for shuffle (the sampler decides the order)",
            (ctx.replace(args.values["shuffle"], "False"),),
        )
    edits = remove_arguments(ctx, call, [args.nodes["shuffle"]])
    if edits is None:
        return None
    return Fix("Remove `shuffle=True` (the sampler decides the order)", tuple(edits))


# ---- TD502 ---------------------------------------------------------------------------------
@rule(
    "TD502",
    "sampler-set-epoch",
    Severity.WARNING,
    "A DistributedSampler whose epoch loop never calls set_epoch(): the same order every epoch.",
    fixable=True,
)
def sampler_set_epoch(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    samplers = list(sem.calls_to(*DISTRIBUTED_SAMPLERS))
    if not samplers or sem.method_calls("set_epoch"):
        return
    for sampler in samplers:
        args = bind_arguments(sampler, SAMPLER_POSITIONAL)
        shuffle = args.get("shuffle")
        if args.bound("shuffle") and not is_true(shuffle):
            continue  # shuffle=False: the order is meant to stay; a variable: cannot tell
        found = _epoch_loop_of(ctx, sampler)
        if found is None:
            continue
        epoch_loop, loader_handle, sampler_handle = found
        if _epoch_set_by_helper(sem, [loader_handle, sampler_handle]):
            continue
        message = (
            "this DistributedSampler shuffles with the seed `seed + epoch`, and its epoch is "
            "never set: every epoch visits the samples in the same order; call "
            "`sampler.set_epoch(epoch)` at the start of each epoch"
        )
        fix = _set_epoch_fix(ctx, epoch_loop, loader_handle, sampler_handle, sampler)
        yield ctx.finding("TD502", sampler, message, fix)


def _epoch_loop_of(
    ctx: RuleContext, sampler: ast.Call
) -> tuple[ast.For | ast.AsyncFor | ast.While, str, str | None] | None:
    """The loop whose iterations each walk a loader that draws from `sampler`."""
    sem = ctx.sem
    sampler_handle = assigned_name(sem, sampler)
    for call, args in loader_calls(sem):
        value = args.get("sampler")
        if value is None:
            continue
        if value is sampler:
            pass
        elif sampler_handle is None or sem.dotted(value) != sampler_handle:
            continue
        elif not same_binding(sem, sampler_handle, sampler, call):
            continue
        handle = assigned_name(sem, call)
        if handle is None or _prepared_elsewhere(sem, handle) or _is_eval_loader(sem, call, args):
            continue  # the order of an evaluation pass does not matter
        loop = _epoch_loop_around_uses(sem, handle, call)
        if loop is not None:
            return loop, handle, sampler_handle
    return None


def _epoch_set_by_helper(sem: Semantics, handles: list[str | None]) -> bool:
    """`set_sampler_epoch(train_loader, epoch)`: a function named for setting the epoch gets the
    loader or the sampler; what it does is out of sight, and likely `.set_epoch(epoch)`."""
    for handle in handles:
        if handle is None:
            continue
        for call in _calls_passing(sem, handle):
            words = _words(last_name(sem, call.func))
            if "set" in words and any(word.startswith("epoch") for word in words):
                return True
    return False


def _prepared_elsewhere(sem: Semantics, handle: str) -> bool:
    """`accelerator.prepare(loader)`: the wrapper sets the epoch itself."""
    for call in sem.method_calls("prepare"):
        if any(sem.dotted(arg) == handle for arg in call.args):
            return True
    return False


def _epoch_loop_around_uses(
    sem: Semantics, handle: str, bound_at: ast.AST
) -> ast.For | ast.AsyncFor | ast.While | None:
    for site in iteration_sites(sem, handle, bound_at):
        around = sem.enclosing_loops(site.loop if site.loop is not None else site.node)
        if around:
            return around[0]
    # `for epoch in ...: train_one_epoch(model, loader, ...)`
    for call in _calls_passing(sem, handle):
        func = call.func
        if isinstance(func, ast.Name) and func.id in NON_ITERATING_CALLS:
            continue
        if not same_binding(sem, handle, bound_at, call):
            continue
        around = sem.enclosing_loops(call)
        if around and not any(
            loop_mentions(sem, loop, handle) is not None for loop in around
        ):
            return around[0]
    return None


def _calls_passing(sem: Semantics, dotted: str) -> list[ast.Call]:
    """Calls that get `dotted` itself as an argument, from an index built once."""
    index = sem.derived.get("data:passed_names")
    if index is None:
        index = {}
        for call in sem.calls:
            for value in [*call.args, *(k.value for k in call.keywords)]:
                if isinstance(value, ast.Name | ast.Attribute):
                    name = sem.dotted(value)
                    if name is not None:
                        index.setdefault(name, []).append(call)
        sem.derived["data:passed_names"] = index
    return index.get(dotted, [])


def _set_epoch_fix(
    ctx: RuleContext,
    loop: ast.For | ast.AsyncFor | ast.While,
    loader_handle: str,
    sampler_handle: str | None,
    sampler: ast.Call,
) -> Fix | None:
    if not isinstance(loop, ast.For | ast.AsyncFor) or not isinstance(loop.target, ast.Name):
        return None
    epoch = loop.target.id
    if epoch == "_":
        return None
    first = loop.body[0]
    if first.lineno == loop.lineno:
        return None
    sem = ctx.sem
    if sampler_handle is not None and same_binding(sem, sampler_handle, sampler, loop):
        receiver = sampler_handle
    else:
        receiver = f"{loader_handle}.sampler"
    return Fix(
        f"Call `{receiver}.set_epoch({epoch})` at the start of each epoch",
        (ctx.insert_line_before(first, f"{receiver}.set_epoch({epoch})"),),
    )


# ---- TD503 ---------------------------------------------------------------------------------
@rule(
    "TD503",
    "workers-options-without-workers",
    Severity.ERROR,
    "persistent_workers=True or prefetch_factor= with num_workers=0 raises ValueError.",
    fixable=True,
)
def workers_options_without_workers(ctx: RuleContext) -> Iterator[Finding]:
    for call, args in loader_calls(ctx.sem):
        workers = args.get("num_workers")
        if workers is None:
            if not args.unset("num_workers"):
                continue
        elif int_constant(workers) != 0:
            continue
        where = "`num_workers=0`" if workers is not None else "`num_workers` unset (0)"
        persistent = args.get("persistent_workers")
        if persistent is not None and isinstance(persistent, ast.Constant) and persistent.value:
            message = (
                f"`persistent_workers=True` with {where} raises \"ValueError: "
                "persistent_workers option needs num_workers > 0\"; remove it, or load with "
                "worker processes (`num_workers=<n>`)"
            )
            yield ctx.finding(
                "TD503",
                args.nodes["persistent_workers"],
                message,
                _remove_option_fix(ctx, call, args, "persistent_workers"),
            )
        prefetch = args.get("prefetch_factor")
        if prefetch is not None and isinstance(prefetch, ast.Constant) and not is_none(prefetch):
            message = (
                f"`prefetch_factor=` with {where} raises \"ValueError: prefetch_factor option "
                "could only be specified in multiprocessing.let num_workers > 0 to enable "
                "multiprocessing, otherwise set prefetch_factor to None.\"; remove it, or load "
                "with worker processes (`num_workers=<n>`)"
            )
            yield ctx.finding(
                "TD503",
                args.nodes["prefetch_factor"],
                message,
                _remove_option_fix(ctx, call, args, "prefetch_factor"),
            )


def _remove_option_fix(ctx: RuleContext, call: ast.Call, args: Arguments, name: str) -> Fix | None:
    edits = remove_arguments(ctx, call, [args.nodes[name]])
    if edits is None:
        return None
    return Fix(f"Remove `{name}=` (it only applies to worker processes)", tuple(edits))


# ---- TD504 ---------------------------------------------------------------------------------
@rule(
    "TD504",
    "single-process-loading",
    Severity.INFORMATION,
    "A training DataLoader loads every batch in the main process (num_workers unset or 0).",
    fixable=True,
    # On the ecosystem corpus most loaders without workers are examples on small or prepared
    # data (GLUE rows tokenized ahead of time, a file's text in one tensor), where workers
    # would not speed anything up: too noisy to be on by default.
    enabled_by_default=False,
)
def single_process_loading(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for call, args in loader_calls(sem):
        workers = args.get("num_workers")
        if workers is None:
            if not args.unset("num_workers"):
                continue
        elif int_constant(workers) != 0:
            continue  # workers already, or a variable (`num_workers=n`)
        if args.bound("persistent_workers") or args.bound("prefetch_factor"):
            continue  # TD503's case
        if _in_memory_dataset(sem, args) or _workers_would_not_help(sem, args):
            continue
        if not is_training_loader(sem, call, args):
            continue
        where = "`num_workers=0`" if workers is not None else "no `num_workers`"
        message = (
            f"this training DataLoader has {where}: every batch is loaded and collated in the "
            "main process while the model waits; load in parallel with `num_workers=<n>` "
            "(and `pin_memory=True` when training on CUDA)"
        )
        where_node = workers if workers is not None else call.func
        yield ctx.finding("TD504", where_node, message, _workers_fix(ctx, call, args))


def _workers_would_not_help(sem: Semantics, args: Arguments) -> bool:
    """Items a worker could not load (placed on the GPU) or that cost next to nothing (MNIST,
    rows tokenized ahead of time, a tensor of indices)."""
    value = _dataset_value(sem, args)
    collate_fn = args.get("collate_fn")
    return (
        places_items_on_device(sem, value, collate_fn)
        or small_builtin_dataset(sem, value)
        or pretokenized_dataset(sem, args.get("dataset"), args.call, collate_fn)
        or tensor_dataset_value(sem, args.get("dataset"), args.call)
    )


def _in_memory_dataset(sem: Semantics, args: Arguments) -> bool:
    """A `TensorDataset`, a `range`, a list/tuple or a dataset class of this file that holds
    its data in memory is indexed in memory: worker processes would only add overhead."""
    value = _dataset_value(sem, args)
    if isinstance(value, ast.List | ast.Tuple | ast.ListComp):
        return True
    if not isinstance(value, ast.Call):
        return _in_memory_local_dataset(sem, value, args.call)
    if isinstance(value.func, ast.Name) and value.func.id in ("range", "list", "tuple"):
        return sem.qualname(value.func) is None  # the builtin, not a name imported over it
    return last_name(sem, value.func) == "TensorDataset" or _in_memory_local_dataset(
        sem, value, args.call
    )


# What a custom dataset may do and still count as in memory. Its `__init__` may read anything
# once (that happens before training starts); each `__getitem__` must only index arrays,
# tensors and lists held in attributes, with cheap conversions, and read nothing.
SUBSET_CLASSES = ("torch.utils.data.Subset", "torch.utils.data.dataset.Subset")
# torch/numpy functions whose result reads through to storage, or which read or write files
STORAGE_FUNCTIONS = frozenset(
    {"load", "save", "memmap", "open_memmap", "from_file", "fromfile", "loadtxt", "genfromtxt",
     "tofile", "savez", "savetxt"}
)
IN_MEMORY_BUILTINS = frozenset({"list", "tuple", "dict", "set", "sorted", "range"})
CHEAP_BUILTINS = frozenset(
    {"int", "float", "bool", "complex", "len", "min", "max", "abs", "round", "divmod", "slice",
     "tuple", "list", "dict", "range", "isinstance", "IndexError", "KeyError", "ValueError",
     "StopIteration"}
)
# tensor and array methods that convert or reshape one item
CHEAP_METHODS = frozenset(
    {"float", "double", "half", "bfloat16", "long", "int", "short", "bool", "byte", "char", "to",
     "type", "type_as", "clone", "detach", "contiguous", "view", "view_as", "reshape",
     "reshape_as", "unsqueeze", "squeeze", "flatten", "permute", "transpose", "t", "item",
     "tolist", "numpy", "astype", "copy", "size", "dim", "expand", "expand_as", "repeat", "flip",
     "narrow", "select", "index_select", "get", "keys", "values", "items"}
)
CHEAP_STATEMENTS = (
    ast.Return, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.If, ast.Pass, ast.Raise,
    ast.Assert,
)
# (value, element of it a tuple target takes or None, the function the value is in)
Binding = tuple[ast.expr, int | None, Function]
MAX_DEPTH = 6  # names, attributes and functions followed, at most


def _in_memory_local_dataset(sem: Semantics, value: ast.AST | None, at: ast.AST,
                             depth: int = 0) -> bool:
    """An instance of a map-style dataset class of this file that holds its data in memory
    (see `_class_in_memory`), or a `Subset` of one. Classes from elsewhere stay unknown."""
    if value is None or depth > MAX_DEPTH:
        return False
    if isinstance(value, ast.Name | ast.Attribute):
        bindings = _dataset_bindings(sem, value, at)
        return bool(bindings) and all(
            _in_memory_local_dataset(sem, bound, bound, depth + 1) for bound in bindings
        )
    if not isinstance(value, ast.Call):
        return False
    if sem.qualname(value.func) in SUBSET_CLASSES:
        inner = bind_arguments(value, ("dataset", "indices")).get("dataset")
        return _in_memory_local_dataset(sem, inner, value, depth + 1)
    cls = _local_class(sem, value.func)
    return cls is not None and _class_in_memory(sem, cls, _in_memory_arguments(sem, cls, value))


def _in_memory_arguments(sem: Semantics, cls: ast.ClassDef, call: ast.Call) -> frozenset[str]:
    """The parameters of `cls.__init__` that this constructor call fills with a tensor or
    array held in memory (`TextWindows(torch.from_numpy(text), 256)`)."""
    init = methods_of(cls).get("__init__")
    if init is None:
        return frozenset()
    parameters = parameter_names(init)[1:]
    bound = bind_arguments(call, tuple(parameters))
    return frozenset(
        name for name, value in bound.values.items()
        if name in parameters and tensor_dataset_value(sem, value, call)
    )


def _dataset_bindings(sem: Semantics, node: ast.Name | ast.Attribute, at: ast.AST) -> list:
    """The values `node` may hold at `at`: its reaching assignment in this scope, else, for
    `self.x`, every assignment to it in the enclosing class."""
    dotted = sem.dotted(node)
    if dotted is None:
        return []
    definition = flow_of(sem, function_scope(sem, at)).reaching(dotted, at)
    if definition is not None:
        return [definition.value] if definition.value is not None else []
    owner = enclosing_class(sem, at)
    if not dotted.startswith("self.") or owner is None:
        return []
    return [
        assign.value
        for assign in _assignments_to(sem, dotted)
        if enclosing_class(sem, assign) is owner
    ]


def _local_class(sem: Semantics, func: ast.AST) -> ast.ClassDef | None:
    if not isinstance(func, ast.Name) or sem.qualname(func) is not None:
        return None
    for cls in sem.classes:
        if cls.name == func.id and at_module_level(sem, cls):
            return cls
    return None


def _class_in_memory(sem: Semantics, cls: ast.ClassDef, given: frozenset[str]) -> bool:
    """`__getitem__` only indexes attributes that the class fills with in-memory values
    (tensors, arrays, lists, results of torch and numpy functions, or the `__init__`
    parameters named in `given`, which this construction fills with in-memory tensors),
    converts the items cheaply, and reads nothing."""
    memo = sem.derived.setdefault("data:in_memory_classes", {})
    key = (id(cls), given)
    found = memo.get(key)
    if found is None:
        memo[key] = False  # a class reached again while being decided does not count
        methods = methods_of(cls)
        getitem = methods.get("__getitem__")
        found = memo[key] = (
            getitem is not None
            and "__iter__" not in methods
            and _cheap_getitem(sem, cls, getitem, given)
        )
    return found


def _cheap_getitem(sem: Semantics, cls: ast.ClassDef, getitem: Function,
                   given: frozenset[str]) -> bool:
    local_names = set(parameter_names(getitem)) | set(_local_bindings(sem, getitem))
    for statement in getitem.body:
        for node in ast.walk(statement):
            if isinstance(node, ast.stmt) and not isinstance(node, CHEAP_STATEMENTS):
                return False  # loops, `with open(...)`, `try`, nested definitions
            if isinstance(node, ast.Call) and not _cheap_call(sem, node):
                return False
            if (
                isinstance(node, ast.Name)
                and node.id not in local_names
                and sem.qualname(node) is None
                and _holds_data_use(sem, node)
            ):
                return False  # a module-level store indexed per item: unknown
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and _holds_data_use(sem, node)
                and not _attribute_in_memory(sem, cls, node.attr, 0, given)
            ):
                return False
    return True


def _holds_data_use(sem: Semantics, node: ast.AST) -> bool:
    """`node` is indexed, iterated or has a method called on it."""
    parent = sem.parent(node)
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return True
    if isinstance(parent, ast.comprehension) and parent.iter is node:
        return True
    return isinstance(parent, ast.Attribute) and isinstance(sem.parent(parent), ast.Call)


def _cheap_call(sem: Semantics, call: ast.Call) -> bool:
    func = call.func
    qualname = sem.qualname(func)
    if qualname is not None:
        return _array_function(qualname)
    if isinstance(func, ast.Name):
        return func.id in CHEAP_BUILTINS and func.id not in module_functions(sem)
    if isinstance(func, ast.Attribute):
        receiver = func.value
        if isinstance(receiver, ast.Name) and receiver.id == "self":
            return False  # the dataset's own methods, transforms, loaders
        return func.attr in CHEAP_METHODS
    return False


def _array_function(qualname: str) -> bool:
    """A torch or numpy function (`torch.randn`, `np.stack`, `F.one_hot`) that does not read
    or write storage."""
    module, _, name = qualname.rpartition(".")
    if module not in ("torch", "numpy", "numpy.random", "torch.nn.functional"):
        return False
    return name not in STORAGE_FUNCTIONS


def _attribute_in_memory(sem: Semantics, cls: ast.ClassDef, attr: str, depth: int,
                         given: frozenset[str]) -> bool:
    """Every assignment to `self.<attr>` in the class holds an in-memory value, and there is
    at least one (an attribute set elsewhere is unknown)."""
    bindings = _attribute_bindings(sem, cls).get(attr, [])
    return bool(bindings) and all(
        _binding_in_memory(sem, cls, binding, depth + 1, given) for binding in bindings
    )


def _attribute_bindings(sem: Semantics, cls: ast.ClassDef) -> dict[str, list[Binding]]:
    memo = sem.derived.setdefault("data:attribute_bindings", {})
    found = memo.get(id(cls))
    if found is None:
        found = memo[id(cls)] = {}
        for method in methods_of(cls).values():
            for name, bindings in _local_bindings(sem, method).items():
                if name.startswith("self."):
                    found.setdefault(name[len("self."):], []).extend(bindings)
    return found


def _local_bindings(sem: Semantics, function: Function) -> dict[str, list[Binding]]:
    """`name` (or `self.x`) → the values assigned to it in `function`, with the element a
    tuple target takes (`self.x, self.y = f()`)."""
    memo = sem.derived.setdefault("data:local_bindings", {})
    found: dict[str, list[Binding]] | None = memo.get(id(function))
    if found is not None:
        return found
    found = memo[id(function)] = {}

    def bind(target: ast.expr, value: ast.expr, index: int | None) -> None:
        if isinstance(target, ast.Name):
            found.setdefault(target.id, []).append((value, index, function))
        elif (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            found.setdefault(f"self.{target.attr}", []).append((value, index, function))

    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Tuple | ast.List):
                if any(isinstance(element, ast.Starred) for element in target.elts):
                    continue
                for index, element in enumerate(target.elts):
                    bind(element, value, index)
            else:
                bind(target, value, None)
    return found


def _binding_in_memory(sem: Semantics, cls: ast.ClassDef, binding: Binding, depth: int,
                       given: frozenset[str]) -> bool:
    value, index, function = binding
    if depth > MAX_DEPTH:
        return False
    if index is not None:
        if isinstance(value, ast.Tuple | ast.List):
            if len(value.elts) <= index or any(isinstance(e, ast.Starred) for e in value.elts):
                return False
            return _value_in_memory(sem, cls, value.elts[index], function, depth, given)
        callee = _local_function(sem, value)
        if callee is not None:
            return _returns_in_memory(sem, cls, callee, index, depth, given)
    return _value_in_memory(sem, cls, value, function, depth, given)


def _local_function(sem: Semantics, value: ast.expr) -> Function | None:
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        if sem.qualname(value.func) is None:
            return module_functions(sem).get(value.func.id)
    return None


def _returns_in_memory(sem: Semantics, cls: ast.ClassDef, function: Function,
                       index: int | None, depth: int, given: frozenset[str]) -> bool:
    returns = [
        node.value
        for node in ast.walk(function)
        if isinstance(node, ast.Return) and sem.enclosing_function(node) is function
    ]
    return bool(returns) and all(
        value is not None
        and _binding_in_memory(sem, cls, (value, index, function), depth + 1, given)
        for value in returns
    )


def _value_in_memory(sem: Semantics, cls: ast.ClassDef, value: ast.expr, function: Function,
                     depth: int, given: frozenset[str]) -> bool:
    """A tensor, array, list or other plain value computed in `function`, not a handle that
    reads storage when indexed (`np.load(..., mmap_mode="r")`, an HDF5 file, a parameter)."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(value, ast.Constant | ast.List | ast.Tuple | ast.Set | ast.Dict | ast.ListComp
                  | ast.SetComp | ast.DictComp):
        return True
    if isinstance(value, ast.BinOp):
        return any(
            _value_in_memory(sem, cls, side, function, depth, given)
            for side in (value.left, value.right)
        )
    if isinstance(value, ast.UnaryOp):
        return _value_in_memory(sem, cls, value.operand, function, depth, given)
    if isinstance(value, ast.IfExp):
        return all(
            _value_in_memory(sem, cls, branch, function, depth, given)
            for branch in (value.body, value.orelse)
        )
    if isinstance(value, ast.Subscript):
        return _value_in_memory(sem, cls, value.value, function, depth, given)
    if isinstance(value, ast.Name):
        bindings = _local_bindings(sem, function).get(value.id, [])
        if not bindings:
            # a parameter of `__init__` that the constructor call fills with a tensor
            return value.id in given and function is methods_of(cls).get("__init__")
        return all(
            _binding_in_memory(sem, cls, binding, depth + 1, given) for binding in bindings
        )
    if isinstance(value, ast.Attribute):
        if isinstance(value.value, ast.Name) and value.value.id == "self":
            return _attribute_in_memory(sem, cls, value.attr, depth, given)
        return False
    if not isinstance(value, ast.Call):
        return False
    qualname = sem.qualname(value.func)
    if qualname is not None:
        if qualname == "torch.load":  # read whole, unless memory-mapped
            mmap = bind_arguments(value, ()).get("mmap")
            return mmap is None or isinstance(mmap, ast.Constant) and not mmap.value
        return _array_function(qualname)
    if isinstance(value.func, ast.Name):
        callee = _local_function(sem, value)
        if callee is not None:
            return _returns_in_memory(sem, cls, callee, None, depth, given)
        return value.func.id in IN_MEMORY_BUILTINS
    if isinstance(value.func, ast.Attribute):
        # a method of an in-memory value: `x.astype(...)`, `rng.normal(...)`, `t.unsqueeze(1)`
        return _value_in_memory(sem, cls, value.func.value, function, depth, given)
    return False


def _workers_fix(ctx: RuleContext, call: ast.Call, args: Arguments) -> Fix | None:
    sem = ctx.sem
    if args.open or _unguarded_worker_start(ctx, call) is not None:
        return None  # more workers here would start processes at import time (TD505)
    workers = args.get("num_workers")
    edits: list[Edit] = []
    if workers is not None:
        edits.append(ctx.replace(workers, str(DEFAULT_WORKERS)))
        extra = [] if args.bound("pin_memory") or not _uses_cuda(sem) else ["pin_memory=True"]
    else:
        extra = [f"num_workers={DEFAULT_WORKERS}"]
        if not args.bound("pin_memory") and _uses_cuda(sem):
            extra.append("pin_memory=True")
    if extra:
        edit = add_keyword(ctx, call, ", ".join(extra))
        if edit is None:
            return None
        edits.append(edit)
    title = f"Load with {DEFAULT_WORKERS} worker processes" + (
        " and pinned memory" if "pin_memory=True" in extra else ""
    )
    return Fix(title, tuple(edits), safe=False)


def _uses_cuda(sem: Semantics) -> bool:
    cached = sem.derived.get("data:uses_cuda")
    if cached is None:
        cached = bool(sem.method_calls("cuda")) or any(
            name.startswith("torch.cuda.") for name in sem.calls_by_qualname
        )
        if not cached:
            for call in sem.calls_to("torch.device"):
                if call.args and isinstance(call.args[0], ast.Constant):
                    cached = str(call.args[0].value).startswith("cuda")
                    if cached:
                        break
        sem.derived["data:uses_cuda"] = cached
    return cached


# ---- TD505 ---------------------------------------------------------------------------------
@rule(
    "TD505",
    "workers-without-main-guard",
    Severity.WARNING,
    "DataLoader worker processes started at import time, outside `if __name__ == \"__main__\":`.",
    fixable=True,
)
def workers_without_main_guard(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    if _forces_fork(sem):
        return
    sites = _WorkerStarts(ctx).unguarded_module_sites()
    # The first place is where the re-imported script breaks; one guard fixes every later one.
    for node in sites[:1]:
        message = (
            "DataLoader worker processes start here, at module level without "
            "`if __name__ == \"__main__\":`: under the spawn and forkserver start methods "
            "(Windows, macOS) each worker re-imports this file, reaches this line again and "
            "fails (\"An attempt has been made to start a new process before the current "
            "process has finished its bootstrapping phase\"); put the script part under a "
            "main guard"
        )
        yield ctx.finding("TD505", node, message, _main_guard_fix(ctx, node))


def _forces_fork(sem: Semantics) -> bool:
    for call in sem.method_calls("set_start_method"):
        if call.args and isinstance(call.args[0], ast.Constant) and call.args[0].value == "fork":
            return True
    return False


def _starts_workers(sem: Semantics, args: Arguments) -> bool:
    context = args.get("multiprocessing_context")
    if isinstance(context, ast.Constant) and context.value == "fork":
        return False
    return _positive_count(sem, args.get("num_workers"))


def _positive_count(sem: Semantics, value: ast.AST | None, depth: int = 0) -> bool:
    """A worker count that is certainly above zero: `4`, `NUM_WORKERS = 4`, `os.cpu_count()`."""
    if value is None or depth > 3:
        return False
    number = int_constant(value)
    if number is not None:
        return number > 0
    if isinstance(value, ast.Call):
        name = last_name(sem, value.func)
        if name == "cpu_count":
            return True
        if name in ("min", "max") and value.args:
            results = [_positive_count(sem, arg, depth + 1) for arg in value.args]
            return all(results) if name == "min" else any(results)
        return False
    if isinstance(value, ast.Name):
        assigns = [
            assign
            for assign in _assignments_to(sem, value.id)
            if at_module_level(sem, assign) and isinstance(sem.parent(assign), ast.Module)
        ]
        if len(assigns) == 1 and assigns[0].value is not None:
            return _positive_count(sem, assigns[0].value, depth + 1)
    return False


class _WorkerStarts:
    """Where loaders with worker processes are iterated, followed through local calls."""

    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx
        self.sem = ctx.sem
        self.loaders: list[tuple[ast.Call, str]] = []
        for call, args in loader_calls(self.sem):
            handle = assigned_name(self.sem, call)
            if handle is not None and _starts_workers(self.sem, args):
                self.loaders.append((call, handle))
        # per handle, the scopes its worker loaders are bound in (see `same_binding`)
        self.loader_scopes: dict[str, set[ast.AST | None]] = {}
        for call, handle in self.loaders:
            scope = binding_scope(self.sem, handle, call)
            self.loader_scopes.setdefault(handle, set()).add(scope)
        self.functions = module_functions(self.sem)
        self.memo: dict[int, bool] = {}
        self.param_memo: dict[tuple[int, str], bool] = {}
        self.calls_by_function: dict[int, list[ast.Call]] | None = None
        self.direct_starters: set[int] | None = None
        self.method_names: set[str] | None = None

    # -- functions ---------------------------------------------------------------------------
    def function_starts(self, function: Function) -> bool:
        key = id(function)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = False  # cycles: assume not
        result = self._function_starts(function)
        self.memo[key] = result
        return result

    def _function_starts(self, function: Function) -> bool:
        if self.direct_starters is None:
            self.direct_starters = set()
            for call, handle in self.loaders:
                for site in iteration_sites(self.sem, handle, call):
                    owner = self.sem.enclosing_function(site.node)
                    if owner is not None:
                        self.direct_starters.add(id(owner))
        if id(function) in self.direct_starters:
            return True
        for call in self._calls_inside(function):
            if self.call_starts(call):
                return True
        return False

    def _calls_inside(self, function: Function) -> list[ast.Call]:
        if self.calls_by_function is None:
            self.calls_by_function = {}
            for call in self.sem.calls:
                owner = self.sem.enclosing_function(call)
                if owner is not None:
                    self.calls_by_function.setdefault(id(owner), []).append(call)
        return self.calls_by_function.get(id(function), [])

    def callee(self, call: ast.Call) -> tuple[Function, bool] | None:
        """The local function a call runs, and whether it is a method (its `self` is bound)."""
        sem = self.sem
        func = call.func
        if isinstance(func, ast.Name):
            target = self.functions.get(func.id)
            return (target, False) if target is not None else None
        if not isinstance(func, ast.Attribute):
            return None
        receiver = func.value
        cls: ast.ClassDef | None = None
        if isinstance(receiver, ast.Name) and receiver.id == "self":
            cls = enclosing_class(sem, call)
        elif isinstance(receiver, ast.Name):
            cls = class_of_instance(sem, receiver.id, call)
        if cls is None:
            return None
        method = methods_of(cls).get(func.attr)
        return (method, True) if method is not None else None


    def _may_call_local(self, call: ast.Call) -> bool:
        """A cheap first look: a call of a local function or of a local class's method."""
        func = call.func
        if isinstance(func, ast.Name):
            return func.id in self.functions
        if self.method_names is None:
            self.method_names = {
                name for cls in self.sem.classes for name in methods_of(cls)
            }
        return isinstance(func, ast.Attribute) and func.attr in self.method_names

    def call_starts(self, call: ast.Call) -> bool:
        found = self.callee(call)
        if found is None:
            return False
        function, is_method = found
        if self.function_starts(function):
            return True
        # `train(loader)` with a worker loader, where `train` iterates that parameter
        parameters = parameter_names(function)
        if is_method and parameters:
            parameters = parameters[1:]
        passed: list[tuple[str, ast.AST]] = list(zip(parameters, call.args, strict=False))
        passed += [(k.arg, k.value) for k in call.keywords if k.arg is not None]
        for parameter, value in passed:
            if not self._is_worker_loader(value, call):
                continue
            if self._iterates_parameter(function, parameter):
                return True
        return False

    def _is_worker_loader(self, value: ast.AST, at: ast.AST) -> bool:
        dotted = self.sem.dotted(value)
        if dotted is None or dotted not in self.loader_scopes:
            return False
        bound_scopes = self.loader_scopes[dotted]
        used_scope = binding_scope(self.sem, dotted, at)
        if used_scope in bound_scopes:
            return True
        return any(
            isinstance(scope, ast.Module) for scope in bound_scopes
        ) and reaches_from_module(self.sem, dotted, used_scope)

    def _iterates_parameter(self, function: Function, parameter: str) -> bool:
        key = (id(function), parameter)
        if key not in self.param_memo:
            self.param_memo[key] = bool(
                [
                    site
                    for site in iteration_sites(self.sem, parameter, function.body[0])
                    if self.sem.enclosing_function(site.node) is function
                ]
            )
        return self.param_memo[key]

    # -- the module ----------------------------------------------------------------------------
    def unguarded_module_sites(self) -> list[ast.AST]:
        sem = self.sem
        sites: list[ast.AST] = []
        for call, handle in self.loaders:
            for site in iteration_sites(sem, handle, call):
                if at_module_level(sem, site.node):
                    sites.append(site.node)
        if self.loaders:
            for call in sem.calls:
                if self._may_call_local(call) and at_module_level(sem, call):
                    if self.call_starts(call):
                        sites.append(call)
        unique: dict[int, ast.AST] = {}
        for node in sites:
            if not in_main_guard(sem, node):
                unique.setdefault(id(node), node)
        return sorted(unique.values(), key=lambda n: (n.lineno, n.col_offset))  # type: ignore[attr-defined]


def _unguarded_worker_start(ctx: RuleContext, call: ast.Call) -> ast.AST | None:
    """Where this loader would start workers at import time if it had any (for TD504's fix)."""
    sem = ctx.sem
    handle = assigned_name(sem, call)
    if handle is None:
        return None
    for site in iteration_sites(sem, handle, call):
        if at_module_level(sem, site.node) and not in_main_guard(sem, site.node):
            return site.node
    if at_module_level(sem, call):
        return None
    function = sem.enclosing_function(call)
    if function is None:
        return None
    for caller in calls_by_name(sem, function.name):
        if at_module_level(sem, caller) and not in_main_guard(sem, caller):
            return caller
    return None


def _main_guard_fix(ctx: RuleContext, node: ast.AST) -> Fix | None:
    """Put everything from the statement that starts the workers to the end of the file under
    `if __name__ == "__main__":`."""
    sem = ctx.sem
    statement = top_level_statement(sem, node)
    if statement is None or statement.col_offset != 0:
        return None
    doc = ctx.doc
    first = doc.span_of(statement).start_line
    last = doc.index.line_count - 1
    while last > first and not doc.index.line(last).strip():
        last -= 1
    unit = indent_unit(ctx)
    edits = indent_lines(ctx, first, last, unit)
    if not edits or edits[0].span.start_line != first:
        return None
    guard = Edit(
        Span(first, 0, first, 0), f'if __name__ == "__main__":{doc.line_break()}{unit}'
    )
    return Fix(
        'Run the script part under `if __name__ == "__main__":`',
        (guard, *edits[1:]),
        safe=False,
    )


# ---- TD506 ---------------------------------------------------------------------------------
@rule(
    "TD506",
    "batch-sampler-conflict",
    Severity.ERROR,
    "batch_sampler= together with batch_size, shuffle, sampler or drop_last raises ValueError.",
    fixable=True,
)
def batch_sampler_conflict(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    for call, args in loader_calls(sem):
        batch_sampler = args.get("batch_sampler")
        if batch_sampler is None or sampler_presence(sem, batch_sampler, call) is not Presence.SET:
            continue
        conflicts = _batch_sampler_conflicts(sem, call, args)
        if not conflicts:
            continue
        names = ", ".join(f"`{name}`" for name in conflicts)
        message = (
            f"`batch_sampler=` cannot be combined with {names}: DataLoader raises \"ValueError: "
            "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
            "drop_last\"; the batch sampler alone decides batch size, order and the last batch"
        )
        yield ctx.finding("TD506", args.nodes["batch_sampler"], message,
                          _drop_conflicts_fix(ctx, call, args, conflicts))


def _batch_sampler_conflicts(sem: Semantics, call: ast.Call, args: Arguments) -> list[str]:
    """The arguments that make DataLoader raise next to a batch sampler, as torch tests them:
    `batch_size != 1 or shuffle or sampler is not None or drop_last`."""
    conflicts: list[str] = []
    batch_size = args.get("batch_size")
    if batch_size is not None and (
        (isinstance(batch_size, ast.Constant) and batch_size.value != 1)
        or (isinstance(batch_size, ast.Name | ast.Attribute)
            and int_constant(_constant_value(sem, batch_size, call)) != 1)
    ):
        conflicts.append("batch_size")
    for flag in ("shuffle", "drop_last"):
        value = args.get(flag)
        if isinstance(value, ast.Constant) and value.value:
            conflicts.append(flag)
    if sampler_presence(sem, args.get("sampler"), call) is Presence.SET:
        conflicts.append("sampler")
    return conflicts


def _constant_value(sem: Semantics, name: ast.AST, at: ast.AST) -> ast.AST | None:
    dotted = sem.dotted(name)
    if dotted is None:
        return None
    definition = flow_of(sem, function_scope(sem, at)).reaching(dotted, at)
    if definition is None or not isinstance(definition.value, ast.Constant):
        return None
    return definition.value


def _drop_conflicts_fix(
    ctx: RuleContext, call: ast.Call, args: Arguments, conflicts: list[str]
) -> Fix | None:
    positional_left = [
        name
        for name in args.positional
        if name not in conflicts and LOADER_POSITIONAL.index(name) > min(
            (LOADER_POSITIONAL.index(c) for c in conflicts if c in args.positional), default=99
        )
    ]
    if positional_left:
        return None  # removing a positional argument would shift the ones after it
    edits = remove_arguments(ctx, call, [args.nodes[name] for name in conflicts])
    if edits is None:
        return None
    names = ", ".join(f"`{name}`" for name in conflicts)
    return Fix(f"Remove {names} (the batch sampler decides them)", tuple(edits))
