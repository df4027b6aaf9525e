"""What one item of a DataLoader costs, for TD504: the datasets whose loading worker processes
would not speed up (held in memory, tiny, already tokenized) and the ones they cannot load
(items placed on the GPU). Pure questions about the syntax tree; unknown answers False."""

from __future__ import annotations

import ast

from ...dataflow import flow_of
from ...semantics import FUNCTION_NODES, Function, Semantics
from ...training import function_scope
from ...tree_walk import walk

MAX_DEPTH = 6  # names, subscripts, receivers and functions followed, at most

# torchvision datasets that keep every image in one uint8 tensor in memory: an item is a
# 28×28 conversion, far cheaper than a worker's inter-process round trip
SMALL_IN_MEMORY_DATASETS = frozenset({"MNIST", "FashionMNIST", "KMNIST", "QMNIST", "EMNIST"})
# Transforms that only convert an item (no decoding, resizing or augmentation)
CONVERSION_TRANSFORMS = frozenset(
    {"ToTensor", "Normalize", "ToImage", "ToDtype", "PILToTensor", "ConvertImageDtype"}
)
# Keywords only Hugging Face `datasets.Dataset.map` takes: the function ran over the whole
# dataset ahead of time (a lazy `.map(fn)` of torchdata or webdataset takes none of them).
PRECOMPUTING_MAP_KEYWORDS = frozenset(
    {
        "batched",
        "remove_columns",
        "num_proc",
        "load_from_cache_file",
        "fn_kwargs",
        "desc",
        "batch_size",
        "with_indices",
        "keep_in_memory",
        "cache_file_name",
    }
)
# `datasets.Dataset` methods that return the same precomputed rows, reshaped
ROW_KEEPING_METHODS = frozenset(
    {
        "rename_column",
        "rename_columns",
        "remove_columns",
        "select",
        "shuffle",
        "filter",
        "flatten",
        "cast",
        "cast_column",
        "sort",
        "select_columns",
        "with_format",
        "map",
    }
)
LAZY_TRANSFORM_METHODS = ("set_transform", "with_transform")
# Collators of `transformers` that pad token ids: their items are already tokenized
PADDING_COLLATORS = ("default_data_collator", "DataCollator")
# Tensor methods whose result is a tensor again (index tensors: `mask.nonzero().view(-1)`)
TENSOR_METHODS = frozenset(
    {
        "nonzero",
        "view",
        "reshape",
        "flatten",
        "split",
        "chunk",
        "long",
        "int",
        "float",
        "to",
        "cpu",
        "clone",
        "detach",
        "contiguous",
        "squeeze",
        "unsqueeze",
        "t",
        "repeat",
        "argsort",
        "sort",
        "unique",
        "masked_select",
        "index_select",
    }
)
TENSOR_MAKERS = ("torch.", "numpy.")


# ---- items that cannot come from a worker --------------------------------------------------
def places_items_on_device(
    sem: Semantics, dataset: ast.AST | None, collate_fn: ast.AST | None
) -> bool:
    """The dataset's `__getitem__` or the loader's `collate_fn` moves what it returns to a
    device (`.cuda()`, `.to(device)`, `torch.tensor(..., device=device)`). A worker process
    forked after the parent used CUDA cannot do that ("Cannot re-initialize CUDA in forked
    subprocess"), so `num_workers` is no remedy there."""
    functions: list[Function] = []
    cls = local_class_of(sem, dataset)
    if cls is not None:
        getitem = _method(cls, "__getitem__")
        if getitem is not None:
            functions.append(getitem)
    if isinstance(collate_fn, ast.Name):
        collate = _function_named(sem, collate_fn.id, collate_fn)
        if collate is not None:
            functions.append(collate)
    return any(_moves_to_device(sem, function, 0) for function in functions)


def _moves_to_device(sem: Semantics, function: Function | ast.Lambda, depth: int) -> bool:
    for node in walk(function):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "cuda":
            return True
        if isinstance(func, ast.Attribute) and func.attr == "to" and node.args:
            first = node.args[0]
            if not (isinstance(first, ast.Constant) and first.value == "cpu"):
                if _names_a_device(first):
                    return True
        if any(k.arg == "device" and not _is_cpu_constant(k.value) for k in node.keywords):
            return True
        if depth < 1 and isinstance(func, ast.Name):
            callee = _function_named(sem, func.id, node)
            if (
                callee is not None
                and callee is not function
                and _moves_to_device(sem, callee, depth + 1)
            ):
                return True
    return False


def _names_a_device(node: ast.AST) -> bool:
    """`device`, `args.device`, `self.device`, `"cuda"`, `torch.device("cuda")`: not a dtype."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.startswith("cuda")
    text = ast.unparse(node).lower()
    return "device" in text or "cuda" in text or "gpu" in text


def _is_cpu_constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in ("cpu", None)


# ---- small and precomputed datasets ----------------------------------------------------------
def small_builtin_dataset(sem: Semantics, value: ast.AST | None) -> bool:
    """`torchvision.datasets.MNIST(...)` and its relatives (not a local class of that name),
    with no transform or only conversions (`ToTensor`, `Normalize`): an augmented or resized
    MNIST does real work per item."""
    if not isinstance(value, ast.Call):
        return False
    qualname = sem.qualname(value.func)
    if qualname is None or not qualname.startswith("torchvision.datasets"):
        return False
    if qualname.rsplit(".", 1)[-1] not in SMALL_IN_MEMORY_DATASETS:
        return False
    transforms = [k.value for k in value.keywords if k.arg in ("transform", "transforms")]
    if len(value.args) > 3:
        transforms.append(value.args[3])  # MNIST(root, train, download, transform)
    return all(_conversion_only(sem, t, value, 0) for t in transforms)


def _conversion_only(sem: Semantics, transform: ast.AST, at: ast.AST, depth: int) -> bool:
    """`ToTensor()`, `Normalize(...)`, a `Compose` of them, None, or a name bound to one."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(transform, ast.Constant) and transform.value is None:
        return True
    if isinstance(transform, ast.Name | ast.Attribute):
        bound = _reaching_value(sem, transform, at)
        if bound is None and isinstance(transform, ast.Name):
            bound = _module_value(sem, transform.id)
        return bound is not None and _conversion_only(sem, bound[0], bound[1], depth + 1)
    if not isinstance(transform, ast.Call):
        return False
    name = (sem.dotted(transform.func) or "").rsplit(".", 1)[-1]
    if name == "Compose" and len(transform.args) == 1:
        steps = transform.args[0]
        return isinstance(steps, ast.List | ast.Tuple) and all(
            _conversion_only(sem, step, at, depth + 1) for step in steps.elts
        )
    return name in CONVERSION_TRANSFORMS


def _module_value(sem: Semantics, name: str) -> tuple[ast.AST, ast.AST] | None:
    """The value of the one module-level assignment to `name` (several, or none: None)."""
    assigns = [
        assign
        for assign in sem.assigns
        if isinstance(assign, ast.Assign)
        and isinstance(sem.parent(assign), ast.Module)
        and any(isinstance(t, ast.Name) and t.id == name for t in assign.targets)
    ]
    return (assigns[0].value, assigns[0]) if len(assigns) == 1 else None


def pretokenized_dataset(
    sem: Semantics, value: ast.AST | None, at: ast.AST, collate_fn: ast.AST | None
) -> bool:
    """Rows computed ahead of time by Hugging Face `datasets` (`ds.map(tokenize, batched=True)`
    and what is selected or renamed from it), or batched by a `transformers` collator that pads
    token ids: an item is a lookup of ready token ids, with no per-item work to parallelise."""
    if any(sem.method_calls(name) for name in LAZY_TRANSFORM_METHODS):
        return False  # a transform that runs per item, on access
    if _padding_collator(sem, collate_fn):
        return True
    return _precomputed_rows(sem, value, at, 0)


def _padding_collator(sem: Semantics, collate_fn: ast.AST | None) -> bool:
    if collate_fn is None:
        return False
    if isinstance(collate_fn, ast.Call):
        collate_fn = collate_fn.func
    qualname = sem.qualname(collate_fn) or ""
    if qualname.startswith("transformers") and any(
        qualname.rsplit(".", 1)[-1].startswith(name) for name in PADDING_COLLATORS
    ):
        return True
    if isinstance(collate_fn, ast.Name):
        function = _function_named(sem, collate_fn.id, collate_fn)
        if function is not None:
            returns = _returns_of(sem, function)
            return bool(returns) and all(
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and value.func.attr == "pad"
                and "tokenizer" in ast.unparse(value.func.value).lower()
                for value in returns
            )
    return False


def _precomputed_rows(sem: Semantics, value: ast.AST | None, at: ast.AST, depth: int) -> bool:
    if value is None or depth > MAX_DEPTH:
        return False
    if isinstance(value, ast.Subscript):  # `tokenized["train"]`
        return _precomputed_rows(sem, value.value, at, depth + 1)
    if isinstance(value, ast.Name | ast.Attribute):
        bound = _reaching_value(sem, value, at)
        return bound is not None and _precomputed_rows(sem, bound[0], bound[1], depth + 1)
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr == "map":
        if any(k.arg in PRECOMPUTING_MAP_KEYWORDS for k in value.keywords):
            return True
    if isinstance(func, ast.Attribute) and func.attr in ROW_KEEPING_METHODS:
        return _precomputed_rows(sem, func.value, at, depth + 1)
    if isinstance(func, ast.Name):
        function = _function_named(sem, func.id, value)
        if function is not None:
            returns = _returns_of(sem, function)
            return bool(returns) and all(
                _precomputed_rows(sem, result, result, depth + 1) for result in returns
            )
    return False


# ---- tensors as datasets -----------------------------------------------------------------------
def tensor_dataset_value(
    sem: Semantics, value: ast.AST | None, at: ast.AST, depth: int = 0
) -> bool:
    """A tensor or array indexed directly (`DataLoader(train_idx)` over
    `mask.nonzero().view(-1)`, `torch.arange(n)`): each item is one element of memory."""
    if value is None or depth > MAX_DEPTH:
        return False
    if isinstance(value, ast.Subscript):
        return tensor_dataset_value(sem, value.value, at, depth + 1)
    if isinstance(value, ast.Name | ast.Attribute):
        bound = _reaching_value(sem, value, at)
        return bound is not None and tensor_dataset_value(sem, bound[0], bound[1], depth + 1)
    if not isinstance(value, ast.Call):
        return False
    qualname = sem.qualname(value.func)
    if qualname is not None:
        return qualname.startswith(TENSOR_MAKERS) and qualname.rsplit(".", 1)[-1] not in (
            "load",
            "memmap",
            "from_file",
            "fromfile",
        )
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr in TENSOR_METHODS:
        if func.attr == "to" or func.attr == "sort":
            return False  # also methods of non-tensors: too weak alone
        return func.attr == "nonzero" or tensor_dataset_value(sem, func.value, at, depth + 1)
    return False


# ---- shared look-ups -----------------------------------------------------------------------------
def _reaching_value(
    sem: Semantics, node: ast.Name | ast.Attribute, at: ast.AST
) -> tuple[ast.AST, ast.AST] | None:
    """The value `node` holds at `at` in its scope (the element, for `a, b = x, y`), and the
    statement that bound it."""
    dotted = sem.dotted(node)
    if dotted is None:
        return None
    definition = flow_of(sem, function_scope(sem, at)).reaching(dotted, at)
    if definition is None or definition.value is None:
        return None
    statement = definition.node
    value = definition.value
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        if isinstance(target, ast.Tuple | ast.List):
            if not isinstance(value, ast.Tuple | ast.List) or len(value.elts) != len(target.elts):
                return None
            names = [sem.dotted(element) for element in target.elts]
            if dotted not in names:
                return None
            value = value.elts[names.index(dotted)]
    elif not isinstance(statement, ast.Assign | ast.AnnAssign | ast.NamedExpr):
        return None
    return value, statement


def local_class_of(sem: Semantics, value: ast.AST | None) -> ast.ClassDef | None:
    """The class of this file that `value` (`Dataset(...)`) instantiates: the only class of
    that name, wherever it is defined."""
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Name):
        return None
    if sem.qualname(value.func) is not None:
        return None
    matches = [cls for cls in sem.classes if cls.name == value.func.id]
    return matches[0] if len(matches) == 1 else None


def _method(cls: ast.ClassDef, name: str) -> Function | None:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return node
    return None


def _function_named(sem: Semantics, name: str, at: ast.AST) -> Function | None:
    """The function `name` means at `at`: one defined in the scope that holds `at` (a nested
    `def collate_fn`), else at module level."""
    scope = function_scope(sem, at)
    candidates = [
        function
        for function in _functions_by_name(sem).get(name, [])
        if _defining_scope(sem, function) in (scope, None)
    ]
    own = [f for f in candidates if _defining_scope(sem, f) is scope]
    chosen = own or [f for f in candidates if _defining_scope(sem, f) is None]
    return chosen[-1] if chosen else None


def _functions_by_name(sem: Semantics) -> dict[str, list[Function]]:
    """Every function of the file by name, from an index built once per document."""
    index = sem.derived.get("loader_workload:functions")
    if index is None:
        index = {}
        for function in sem.functions:
            index.setdefault(function.name, []).append(function)
        sem.derived["loader_workload:functions"] = index
    return index


def _defining_scope(sem: Semantics, function: Function) -> ast.AST | None:
    """The function a `def` is nested in; None at module level (or directly in a class)."""
    for ancestor in sem.ancestors(function):
        if isinstance(ancestor, FUNCTION_NODES):
            return ancestor
        if isinstance(ancestor, ast.ClassDef):
            return ancestor
    return None


def _returns_of(sem: Semantics, function: Function) -> list[ast.expr]:
    return [
        node.value
        for node in walk(function)
        if isinstance(node, ast.Return)
        and node.value is not None
        and sem.enclosing_function(node) is function
    ]
