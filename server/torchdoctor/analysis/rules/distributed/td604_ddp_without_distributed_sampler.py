"""TD604 ddp-without-distributed-sampler: A DDP training DataLoader without a DistributedSampler:
every rank trains on the same data."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...bindings import assigned_name, enclosing_class
from ...call_edits import add_keyword
from ...context import RuleContext
from ...dataflow import flow_of
from ...expressions import is_none, last_name
from ...findings import Finding, Fix, Severity, called_names, rule
from ...loader_calls import Arguments, loader_calls
from ...loader_purpose import is_training_loader
from ...parallel_wrappers import DDP_CLASSES, FSDP_CLASSES
from ...semantics import Semantics
from ...training import function_scope
from ...tree_walk import walk
from ._shared import mentions_rank


@rule(
    "TD604",
    "ddp-without-distributed-sampler",
    Severity.WARNING,
    "A DDP training DataLoader without a DistributedSampler: every rank trains on the same data.",
    fixable=True,
    spells=called_names(*DDP_CLASSES, *FSDP_CLASSES),
)
def ddp_without_distributed_sampler(ctx: RuleContext) -> Iterator[Finding]:
    sem = ctx.sem
    wrappers = sem.calls_to(*DDP_CLASSES, *FSDP_CLASSES)
    if not wrappers or _shards_data(sem):
        return
    wrapper = "DistributedDataParallel" if any(sem.calls_to(*DDP_CLASSES)) else "FSDP"
    for call, args in loader_calls(sem):
        if args.open:
            continue
        samplers = [args.get(name) for name in ("sampler", "batch_sampler")]
        if any(value is not None and not is_none(value) for value in samplers):
            continue
        if not any(_same_program_part(sem, wrapper_call, call) for wrapper_call in wrappers):
            continue
        if not is_training_loader(sem, call, args) or _dataset_split_by_rank(sem, args):
            continue
        if _replaced_by_wrapper(sem, call):
            continue
        shuffle = args.get("shuffle")
        if shuffle is None or (isinstance(shuffle, ast.Constant) and not shuffle.value):
            order = "in the same order, so the ranks compute gradients on the same batches"
        else:
            order = (
                "so an epoch goes through the data once per rank (and when the ranks share a "
                "seed, they shuffle alike and compute gradients on the same batches)"
            )
        message = (
            f"this training DataLoader has no DistributedSampler while the model is wrapped in "
            f"{wrapper}: every rank iterates over the whole dataset, {order}; pass "
            "`sampler=DistributedSampler(dataset)`"
        )
        yield ctx.finding("TD604", call.func, message, _sampler_fix(ctx, call, args))


def _same_program_part(sem: Semantics, wrapper: ast.Call, loader: ast.Call) -> bool:
    """The model wrap and the loader belong together: same function, same class, or one of
    them at module level."""
    wrapper_function = sem.enclosing_function(wrapper)
    loader_function = sem.enclosing_function(loader)
    if wrapper_function is None or loader_function is None:
        return True
    if wrapper_function is loader_function:
        return True
    wrapper_class = enclosing_class(sem, wrapper)
    return wrapper_class is not None and wrapper_class is enclosing_class(sem, loader)


def _replaced_by_wrapper(sem: Semantics, loader: ast.Call) -> bool:
    """`model, optimizer, loader = engine.make_private(..., data_loader=loader)`: the loader
    the model trains on is what a wrapper built from this one, and it may well shard the data
    (Opacus swaps in a distributed sampler under DDP). What it returns is unknown here."""
    handle = assigned_name(sem, loader)
    if handle is None:
        return False
    scope = sem.enclosing_function(loader)
    for assign in _call_results_bound_to(sem).get(handle, []):
        if sem.enclosing_function(assign) is not scope or assign.lineno <= loader.lineno:
            continue
        call = assign.value
        if not isinstance(call, ast.Call):
            continue
        passed = [*call.args, *(k.value for k in call.keywords)]
        if any(sem.dotted(value) == handle for value in passed):
            return True
    return False


def _call_results_bound_to(sem: Semantics) -> dict[str, list[ast.Assign]]:
    """`a, b, loader = f(...)` and `loader = f(...)` by each name bound, built once."""
    index = sem.derived.get("distributed:call_results")
    if index is None:
        index = {}
        for assign in sem.assigns:
            if not isinstance(assign, ast.Assign) or not isinstance(assign.value, ast.Call):
                continue
            for target in assign.targets:
                elements = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
                for element in elements:
                    name = sem.dotted(element)
                    if name is not None:
                        index.setdefault(name, []).append(assign)
        sem.derived["distributed:call_results"] = index
    return index


def _shards_data(sem: Semantics) -> bool:
    """The file already splits data between ranks somewhere (any distributed sampler, Hugging
    Face's `split_dataset_by_node`, `dataset.shard(...)`, Accelerate's `prepare`)."""
    for target in sem.imports.values():
        last = target.rsplit(".", 1)[-1]
        if "Sampler" in last and "Dist" in last:
            return True
    for call in sem.calls:
        name = last_name(sem, call.func)
        if "Sampler" in name and "Dist" in name:
            return True
        if name in ("split_dataset_by_node", "split_by_node", "shard", "prepare"):
            return True
    return False


def _dataset_split_by_rank(sem: Semantics, args: Arguments) -> bool:
    dataset = args.get("dataset")
    if dataset is None:
        return True
    values: list[ast.AST] = [dataset]
    dotted = sem.dotted(dataset)
    if dotted is not None:
        definition = flow_of(sem, function_scope(sem, args.call)).reaching(dotted, args.call)
        if definition is not None and definition.value is not None:
            values.append(definition.value)
    for value in values:
        if mentions_rank(value) or any(
            isinstance(n, ast.Name | ast.Attribute) and "world" in (sem.dotted(n) or "").lower()
            for n in walk(value)
        ):
            return True
        if isinstance(value, ast.Call) and _is_iterable_dataset_class(sem, value.func):
            return True
    return False


def _is_iterable_dataset_class(sem: Semantics, func: ast.AST) -> bool:
    """A local `IterableDataset` subclass decides per worker and rank what it yields."""
    name = sem.dotted(func)
    for cls in sem.classes:
        if cls.name == name:
            return any("IterableDataset" in (sem.dotted(base) or "") for base in cls.bases)
    return False


def _distributed_sampler_name(sem: Semantics) -> str | None:
    # through a package, the re-export `torch.utils.data.DistributedSampler` is the short name;
    # a file that imports the sampler class itself never reaches the fix (_shards_data)
    module = sem.name_bound_to("torch.utils.data.distributed")
    if module is not None:
        return f"{module}.DistributedSampler"
    return sem.spelling("torch.utils.data.DistributedSampler")


def _sampler_fix(ctx: RuleContext, call: ast.Call, args: Arguments) -> Fix | None:
    sem = ctx.sem
    dataset = args.get("dataset")
    sampler_class = _distributed_sampler_name(sem)
    if (
        sampler_class is None
        or not isinstance(dataset, ast.Name | ast.Attribute)
        or "shuffle" in args.positional
    ):
        return None
    dataset_text = ctx.doc.source_of(dataset)
    shuffle = args.get("shuffle")
    title = "Shard the data between ranks with a DistributedSampler"
    if shuffle is not None:
        if isinstance(shuffle, ast.Constant) and shuffle.value is True:
            sampler = f"{sampler_class}({dataset_text})"
        else:
            sampler = f"{sampler_class}({dataset_text}, shuffle={ctx.doc.source_of(shuffle)})"
        edit = ctx.replace(args.nodes["shuffle"], f"sampler={sampler}")
        return Fix(title, (edit,), safe=False)
    added = add_keyword(ctx, call, f"sampler={sampler_class}({dataset_text}, shuffle=False)")
    if added is None:
        return None
    return Fix(title, (added,), safe=False)
