"""TD504 single-process-loading: A training DataLoader loads every batch in the main process
(num_workers unset or 0)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ...bindings import (
    assigned_name,
    assignments_to,
    at_module_level,
    calls_by_name,
    enclosing_class,
    methods_of,
    module_functions,
)
from ...call_edits import add_keyword
from ...context import RuleContext
from ...dataflow import flow_of
from ...expressions import last_name
from ...findings import Edit, Finding, Fix, Severity, called_names, rule
from ...loader_calls import LOADER_CLASSES, Arguments, bind_arguments, loader_calls
from ...loader_purpose import dataset_value, is_training_loader
from ...semantics import Function, Semantics
from ...training import function_scope
from ...tree_walk import walk
from ._shared import in_main_guard, int_constant, iteration_sites, parameter_names
from .loader_workload import (
    places_items_on_device,
    pretokenized_dataset,
    small_builtin_dataset,
    tensor_dataset_value,
)

DEFAULT_WORKERS = 4


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
    # every finding is at a DataLoader call (`loader_calls`)
    spells=called_names(*LOADER_CLASSES),
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
    value = dataset_value(sem, args)
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
    value = dataset_value(sem, args)
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
    {
        "load",
        "save",
        "memmap",
        "open_memmap",
        "from_file",
        "fromfile",
        "loadtxt",
        "genfromtxt",
        "tofile",
        "savez",
        "savetxt",
    }
)
IN_MEMORY_BUILTINS = frozenset({"list", "tuple", "dict", "set", "sorted", "range"})
CHEAP_BUILTINS = frozenset(
    {
        "int",
        "float",
        "bool",
        "complex",
        "len",
        "min",
        "max",
        "abs",
        "round",
        "divmod",
        "slice",
        "tuple",
        "list",
        "dict",
        "range",
        "isinstance",
        "IndexError",
        "KeyError",
        "ValueError",
        "StopIteration",
    }
)
# tensor and array methods that convert or reshape one item
CHEAP_METHODS = frozenset(
    {
        "float",
        "double",
        "half",
        "bfloat16",
        "long",
        "int",
        "short",
        "bool",
        "byte",
        "char",
        "to",
        "type",
        "type_as",
        "clone",
        "detach",
        "contiguous",
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "unsqueeze",
        "squeeze",
        "flatten",
        "permute",
        "transpose",
        "t",
        "item",
        "tolist",
        "numpy",
        "astype",
        "copy",
        "size",
        "dim",
        "expand",
        "expand_as",
        "repeat",
        "flip",
        "narrow",
        "select",
        "index_select",
        "get",
        "keys",
        "values",
        "items",
    }
)
CHEAP_STATEMENTS = (
    ast.Return,
    ast.Assign,
    ast.AnnAssign,
    ast.AugAssign,
    ast.Expr,
    ast.If,
    ast.Pass,
    ast.Raise,
    ast.Assert,
)
# (value, element of it a tuple target takes or None, the function the value is in)
Binding = tuple[ast.expr, int | None, Function]
MAX_DEPTH = 6  # names, attributes and functions followed, at most


def _in_memory_local_dataset(
    sem: Semantics, value: ast.AST | None, at: ast.AST, depth: int = 0
) -> bool:
    """An instance of a map-style dataset class of this file that holds its data in memory
    (see `_class_in_memory`), or a `Subset` of one. Classes from elsewhere stay unknown."""
    if value is None or depth > MAX_DEPTH:
        return False
    if isinstance(value, ast.Name | ast.Attribute):
        bindings = _dataset_bindings(sem, value, at)
        return bool(bindings) and all(
            bound is not None and _in_memory_local_dataset(sem, bound, bound, depth + 1)
            for bound in bindings
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
        name
        for name, value in bound.values.items()
        if name in parameters and tensor_dataset_value(sem, value, call)
    )


def _dataset_bindings(
    sem: Semantics, node: ast.Name | ast.Attribute, at: ast.AST
) -> list[ast.expr | None]:
    """The values `node` may hold at `at`: its reaching assignment in this scope, else, for
    `self.x`, every assignment to it in the enclosing class (None for an annotation alone)."""
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
        for assign in assignments_to(sem, dotted)
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
    memo: dict[tuple[int, frozenset[str]], bool] = sem.derived.setdefault(
        "data:in_memory_classes", {}
    )
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


def _cheap_getitem(
    sem: Semantics, cls: ast.ClassDef, getitem: Function, given: frozenset[str]
) -> bool:
    local_names = set(parameter_names(getitem)) | set(_local_bindings(sem, getitem))
    for statement in getitem.body:
        for node in walk(statement):
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


def _attribute_in_memory(
    sem: Semantics, cls: ast.ClassDef, attr: str, depth: int, given: frozenset[str]
) -> bool:
    """Every assignment to `self.<attr>` in the class holds an in-memory value, and there is
    at least one (an attribute set elsewhere is unknown)."""
    bindings = _attribute_bindings(sem, cls).get(attr, [])
    return bool(bindings) and all(
        _binding_in_memory(sem, cls, binding, depth + 1, given) for binding in bindings
    )


def _attribute_bindings(sem: Semantics, cls: ast.ClassDef) -> dict[str, list[Binding]]:
    memo: dict[int, dict[str, list[Binding]]] = sem.derived.setdefault(
        "data:attribute_bindings", {}
    )
    found = memo.get(id(cls))
    if found is None:
        found = memo[id(cls)] = {}
        for method in methods_of(cls).values():
            for name, bindings in _local_bindings(sem, method).items():
                if name.startswith("self."):
                    found.setdefault(name[len("self.") :], []).extend(bindings)
    return found


def _local_bindings(sem: Semantics, function: Function) -> dict[str, list[Binding]]:
    """`name` (or `self.x`) → the values assigned to it in `function`, with the element a
    tuple target takes (`self.x, self.y = f()`)."""
    memo: dict[int, dict[str, list[Binding]]] = sem.derived.setdefault("data:local_bindings", {})
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

    for node in walk(function):
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


def _binding_in_memory(
    sem: Semantics, cls: ast.ClassDef, binding: Binding, depth: int, given: frozenset[str]
) -> bool:
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


def _returns_in_memory(
    sem: Semantics,
    cls: ast.ClassDef,
    function: Function,
    index: int | None,
    depth: int,
    given: frozenset[str],
) -> bool:
    returns = [
        node.value
        for node in walk(function)
        if isinstance(node, ast.Return) and sem.enclosing_function(node) is function
    ]
    return bool(returns) and all(
        value is not None
        and _binding_in_memory(sem, cls, (value, index, function), depth + 1, given)
        for value in returns
    )


def _value_in_memory(
    sem: Semantics,
    cls: ast.ClassDef,
    value: ast.expr,
    function: Function,
    depth: int,
    given: frozenset[str],
) -> bool:
    """A tensor, array, list or other plain value computed in `function`, not a handle that
    reads storage when indexed (`np.load(..., mmap_mode="r")`, an HDF5 file, a parameter)."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(
        value,
        ast.Constant
        | ast.List
        | ast.Tuple
        | ast.Set
        | ast.Dict
        | ast.ListComp
        | ast.SetComp
        | ast.DictComp,
    ):
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
        return all(_binding_in_memory(sem, cls, binding, depth + 1, given) for binding in bindings)
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
