"""What the names in one document mean, computed in one walk over the tree and shared by all rules.

jedi cannot follow `nn.Module.__call__` and needs seconds to load torch, so the rules work on the
syntax and on the local data flow recorded here: which imports a name stands for, which variables
hold optimizers, models, loaders and losses, which loops train.
"""

from __future__ import annotations

import ast
import bisect
import operator
import re
from collections import defaultdict
from collections.abc import (
    Callable,
    Collection,
    Hashable,
    ItemsView,
    Iterator,
    KeysView,
    Mapping,
    Sequence,
    ValuesView,
)
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property, lru_cache
from itertools import chain
from typing import Any, TypeVar

from .tree_walk import CHILD_FIELDS, child_fields

T = TypeVar("T")
N = TypeVar("N", bound=ast.AST)
K = TypeVar("K", bound=Hashable)
FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
LOOP_NODES = (ast.For, ast.AsyncFor, ast.While)
# where a climb for the loops around a node stops, for exact type tests (the parser makes no
# subclasses): asked at every step of a climb
SCOPE_OR_MODULE_TYPES = frozenset({*FUNCTION_NODES, ast.Module})
_LOOP_TYPES = frozenset(LOOP_NODES)
# where a climb for the function around a node stops: at a function (the answer), or at a
# class, a lambda or the module (none); a look-up for each, asked at every step
_FUNCTION_TYPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef})
_OTHER_SCOPE_TYPES = frozenset({ast.ClassDef, ast.Lambda, ast.Module})
_WITH_TYPES = frozenset({ast.With, ast.AsyncWith})
Loop = ast.For | ast.AsyncFor | ast.While
Function = ast.FunctionDef | ast.AsyncFunctionDef

NO_GRAD_CONTEXTS = frozenset(
    {
        "torch.no_grad",
        "torch.inference_mode",
        "torch.autograd.no_grad",
        "torch.autograd.grad_mode.no_grad",
        "torch.autograd.grad_mode.inference_mode",
        "torch.set_grad_enabled",  # only when called with False; checked at the call
    }
)
MODULE_BASES = frozenset(
    {
        "torch.nn.Module",
        "torch.nn.modules.module.Module",
        "pytorch_lightning.LightningModule",
        "lightning.LightningModule",
        "lightning.pytorch.LightningModule",
        "lightning.pytorch.core.LightningModule",
    }
)
SCHEDULER_NAME = re.compile(r"sched|lr_?policy|warmup", re.IGNORECASE)
OPTIMIZER_NAME = re.compile(r"optim|^(\w+_)?opt(_\w+|[a-z0-9]{0,2})?$", re.IGNORECASE)
MODEL_NAME = re.compile(
    r"^(model|net|network|encoder|decoder|backbone|generator|discriminator|classifier"
    r"|netg|netd|student|teacher|critic|unet|vae|ema_model|ddp_model)(_?[a-z0-9]{1,3})?$"
    r"|^\w+_(model|net)$",
    re.IGNORECASE,
)
# What every name the three patterns above match spells, in ASCII lower case: a plain ASCII
# name that spells none of them is answered without the patterns. Most names asked about (`x`,
# `loss`, `outputs`) are such, and each pattern's first search after a parse costs a
# microsecond or two (its code has gone cold), ten times a warm one.
_KIND_NAME_PARTS = (
    "sched",
    "policy",
    "warmup",
    "opt",
    "model",
    "net",
    "encoder",
    "decoder",
    "backbone",
    "generator",
    "discriminator",
    "classifier",
    "student",
    "teacher",
    "critic",
    "vae",
)


def _kind_by_name(last: str) -> ValueKind | None:
    """What a name's last part says it holds (`scheduler`, `opt_g`, `netD`), if anything."""
    if last.isascii():
        lower = last.lower()
        for part in _KIND_NAME_PARTS:
            if part in lower:
                break
        else:
            return None
    if SCHEDULER_NAME.search(last):
        return ValueKind.SCHEDULER
    if OPTIMIZER_NAME.search(last):
        return ValueKind.OPTIMIZER
    if MODEL_NAME.search(last):
        return ValueKind.MODEL
    return None


OPTIMIZER_FACTORIES = (
    "transformers.AdamW",
    "transformers.optimization.AdamW",
    "transformers.Adafactor",
    "timm.optim.create_optimizer",
    "timm.optim.create_optimizer_v2",
)
OPTIMIZER_PACKAGES = ("torch.optim.", "bitsandbytes.optim.", "apex.optimizers.", "torch_optimizer.")
MODEL_FACTORIES = (
    "torchvision.models.",
    "timm.create_model",
    "transformers.",
    "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.DataParallel",
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.compile",
)
LOADER_CLASSES = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")


class ValueKind(str, Enum):
    OPTIMIZER = "optimizer"
    SCHEDULER = "scheduler"
    MODEL = "model"
    LOADER = "loader"
    CRITERION = "criterion"
    SAMPLER = "sampler"


@dataclass
class Semantics:
    tree: ast.Module
    imports: dict[str, str] = field(default_factory=dict)
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    calls_by_attr: Mapping[str, list[ast.Call]] = field(default_factory=dict)
    calls_by_qualname: Mapping[str, list[ast.Call]] = field(default_factory=dict)
    # the calls `name(...)` by the name they call
    calls_by_name: Mapping[str, list[ast.Call]] = field(default_factory=dict)
    functions: list[Function] = field(default_factory=list)
    # every import statement, at any depth, in source order
    import_statements: list[ast.Import | ast.ImportFrom] = field(default_factory=list)
    # the file's functions by name, in source order: methods, and the others
    methods_by_name: Mapping[str, list[Function]] = field(default_factory=dict)
    plain_functions_by_name: Mapping[str, list[Function]] = field(default_factory=dict)
    module_classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    kinds: dict[str, ValueKind] = field(default_factory=dict)
    # the statements binding names in each function body (and the module), by id of the scope:
    # see `bindings_by_scope`
    _bindings_by_scope: dict[int, list[ast.AST]] | None = field(default=None, repr=False)
    # by node (nodes hash and compare by identity, in C: no `id()` call and no pair made per
    # entry): kept from version to version for the blocks an edit left alone (merge_blocks)
    _loops_cache: dict[ast.AST, list[Loop]] = field(default_factory=dict)
    _dotted_cache: dict[ast.AST, str | None] = field(default_factory=dict)
    _function_cache: dict[ast.AST, Function | None] = field(default_factory=dict)
    _kind_cache: dict[str, ValueKind | None] = field(default_factory=dict)
    _qualname_cache: dict[str, str | None] = field(default_factory=dict)
    # the blocks it was merged from, and those a focused view lists
    _blocks: list[BlockIndex] = field(default_factory=list, repr=False)
    _focus: list[BlockIndex] | None = field(default=None, repr=False)
    # the imports and model classes, the same object while they stay equal between versions
    names_key: object = field(default=None, repr=False)
    # while set, every kind asked for is recorded here (what a cached fact depends on)
    kind_reads: dict[str, ValueKind | None] | None = field(default=None, repr=False)
    # facts derived on demand by shared helpers (training structure, data flow), per version
    derived: dict[str, Any] = field(default_factory=dict)
    # the semantics of the whole file when this one is focused on some of its blocks
    _whole: Semantics | None = field(default=None, repr=False)
    # the file's groups made by `gathered`, by name; the previous version's, and the change
    # from it, while this version has not made its own
    _gathered_groups: dict[str, Gathered[Any, Any]] = field(default_factory=dict, repr=False)
    _groups_before: dict[str, Gathered[Any, Any]] | None = field(default=None, repr=False)
    _change: BlockChange | None = field(default=None, repr=False)
    _names_before: object = field(default=None, repr=False)  # the previous version's names key
    _kinds_before: dict[str, ValueKind] | None = field(default=None, repr=False)
    # facts a later version patches rather than makes again (see `fact_before`), by name
    _kept: dict[str, Any] = field(default_factory=dict, repr=False)
    _kept_before: dict[str, Any] | None = field(default=None, repr=False)
    # the memos made by `node_memo`, by name
    _node_memos: dict[str, dict[int, tuple[ast.AST, Any]]] = field(default_factory=dict, repr=False)
    # made for one analysis of a whole file (`build_semantics`): no later version reuses its
    # blocks' facts, so they are kept without what an edit would check them against
    one_shot: bool = field(default=False, repr=False)
    _packages: frozenset[str] | None = field(default=None, repr=False)  # imported_packages()
    _last_names: frozenset[str] | None = field(default=None, repr=False)  # imported_last_names()

    # The calls, assignments, loops and classes of the blocks it lists, in source order: made
    # when first asked for (an edit's analysis asks for none of the whole file's).
    @cached_property
    def calls(self) -> list[ast.Call]:
        return list(chain.from_iterable(block.calls for block in self._listed_blocks()))

    @cached_property
    def assigns(self) -> list[ast.Assign | ast.AnnAssign | ast.AugAssign]:
        return list(chain.from_iterable(block.assigns for block in self._listed_blocks()))

    @cached_property
    def loops(self) -> list[Loop]:
        return list(chain.from_iterable(block.loops for block in self._listed_blocks()))

    @cached_property
    def classes(self) -> list[ast.ClassDef]:
        return list(chain.from_iterable(block.classes for block in self._listed_blocks()))

    @property
    def bindings_by_scope(self) -> dict[int, list[ast.AST]]:
        """The statements binding names in each function body (and the module), by id of the
        scope. A file analysed once groups them when first asked for (most files' rules build
        no data flow); a merge of blocks, as it patches them from the previous version's."""
        whole = self.whole
        found = whole._bindings_by_scope
        if found is None:
            found = whole._bindings_by_scope = defaultdict(list)
            module_bindings: list[ast.AST] = []
            for block in whole._blocks:
                found.update(block.scope_bindings)
                module_bindings += block.module_bindings
            found[id(whole.tree)] = module_bindings
        return found

    def identifiers(self) -> Iterator[str]:
        """Every name, attribute, parameter and keyword argument the blocks it lists mention
        (once per block): a rule whose findings need a name the file never spells can stop
        before its walk."""
        for block in self._listed_blocks():
            yield from block.identifiers

    def mentions(self, names: frozenset[str]) -> bool:
        """Some block it lists spells one of `names` as a name, attribute, parameter or
        keyword argument."""
        if self._focus is not None or self.one_shot:
            # a loop, not `any` over a generator: a whole file analysed once is one block
            for block in self._listed_blocks():
                if not block.identifiers.isdisjoint(names):
                    return True
            return False
        return self._block_mentioning(names) is not None

    def spells_any(self, names: frozenset[str]) -> bool:
        """The file spells one of `names`: as a name, attribute, parameter or keyword argument
        somewhere (`mentions`), or as the last part of what an import binds (`load` for `from
        torch import load as L`). Every call of an imported name, and every reference to one,
        spells its last part one way or the other."""
        whole = self.whole
        return not names.isdisjoint(whole.imported_last_names()) or whole.mentions(names)

    def _block_mentioning(self, names: frozenset[str]) -> BlockIndex | None:
        """A block of the file that spells one of `names`, None when none does. Rules that stop
        where a file never spells what they look for ask this of every version, and a look at
        each of a 10,000-line file's thousand blocks costs 0.1 ms: so each version keeps its
        answers, and the next one looks only at the blocks an edit added (none mentioned the
        names before), or at every block again when the edit removed the one found."""
        answers: dict[frozenset[str], BlockIndex | None] | None = self._kept.get(_MENTIONS)
        if answers is None:
            answers = {}
            self.keep_fact(_MENTIONS, answers)
        if names in answers:
            return answers[names]
        found: BlockIndex | None = None
        known = False
        # what a block spells is its own text's: unlike `fact_before`, an edit that changed
        # the imports or the kinds of names leaves the previous answers true
        before = self._kept_before.get(_MENTIONS) if self._kept_before is not None else None
        change = self._change
        if before is not None and change is not None and names in before:
            witness = before[names]
            if witness is None:
                found = next((b for b in change.added if not b.identifiers.isdisjoint(names)), None)
                known = True
            elif all(witness is not gone for gone in change.gone):
                found, known = witness, True
        if not known:
            found = next((b for b in self._blocks if not b.identifiers.isdisjoint(names)), None)
        answers[names] = found
        return found

    def _listed_blocks(self) -> list[BlockIndex]:
        return self._focus if self._focus is not None else self._blocks

    @property
    def blocks(self) -> list[BlockIndex]:
        """The blocks the file's semantics was merged from, in order (one for a fresh parse)."""
        return self.whole._blocks

    def per_block(
        self,
        name: str,
        build: Callable[[Semantics, BlockIndex], T],
        *,
        reads_kinds: bool = False,
    ) -> list[T]:
        """`build(whole, block)` for each block this semantics lists (a focused view: its
        blocks), kept on the block for the next version while the file's imports and model
        classes stay the same and, for a fact that `reads_kinds`, the kinds of the names it read
        (through `kind_of` and `kind_of_name`, which record them). For facts that read a block's
        own nodes and those only."""
        whole = self.whole
        kinds = whole.kinds if reads_kinds else None
        blocks = self._focus if self._focus is not None else whole._blocks
        return [whole.block_fact(block, name, build, kinds) for block in blocks]

    def block_fact(
        self,
        block: BlockIndex,
        name: str,
        build: Callable[[Semantics, BlockIndex], T],
        kinds: dict[str, ValueKind] | None,
        *,
        reads_names: bool = True,
    ) -> T:
        """One block's fact (see `per_block`): `kinds` is the file's kinds for a fact that
        reads them, else None; a fact that reads neither them nor the names (`reads_names`)
        is kept while the block is."""
        if self.one_shot:
            known = block.cached.get(name)
            if known is None:
                known = block.cached[name] = (None, None, build(self, block), None)
            made: T = known[2]
            return made
        key = self.names_key if reads_names or kinds is not None else None
        entry = block.cached.get(name)
        if entry is None or entry[0] is not key:
            entry = block.cached[name] = self._build_per_block(block, build, kinds, key)
        elif entry[1] is not kinds:
            # the kinds changed (a name renamed somewhere): still true if the kinds it read
            # did not
            reads = entry[3]
            if reads is None or any(
                self.kind_of_name(dotted) is not kind for dotted, kind in reads.items()
            ):
                entry = block.cached[name] = self._build_per_block(block, build, kinds, key)
            else:
                entry = block.cached[name] = (key, kinds, entry[2], reads)
        reads_here = entry[3]
        if reads_here and self.kind_reads is not None:
            # a fact being built around this one reads what this one read
            self.kind_reads.update(reads_here)
        value: T = entry[2]
        return value

    def _build_per_block(
        self,
        block: BlockIndex,
        build: Callable[[Semantics, BlockIndex], T],
        kinds: dict[str, ValueKind] | None,
        key: object,
    ) -> tuple[object, object, T, dict[str, ValueKind | None] | None]:
        if kinds is None:
            return (key, None, build(self, block), None)
        # the kinds it reads are recorded (and for a fact being built around it, too)
        outer = self.kind_reads
        reads: dict[str, ValueKind | None] = {}
        self.kind_reads = reads
        try:
            value = build(self, block)
        finally:
            self.kind_reads = outer
        if outer is not None:
            outer.update(reads)
        return (key, kinds, value, reads)

    def gathered(
        self,
        name: str,
        part: Callable[[Semantics, BlockIndex], dict[K, list[N]]],
        *,
        reads_names: bool = False,
        reads_kinds: bool = False,
    ) -> Gathered[K, N]:
        """`part(whole, block)` of every block of the file, merged by key in source order, kept
        on each block and, from version to version, patched where an edit changed blocks. For
        facts of a block's own nodes alone; or, when it `reads_names`, of its nodes and the
        file's imports and model classes; or, when it `reads_kinds`, the kinds of names too.
        Each block's part is kept as `per_block` keeps a fact."""
        whole = self.whole
        found = whole._gathered_groups.get(name)
        if found is not None:
            return found
        if whole.one_shot:
            # a file analysed once: no later version asks a block for its part, so none is
            # kept on the block (the group is kept, above)
            found = whole._gathered_groups[name] = Gathered(
                [part(whole, block) for block in whole._blocks]
            )
            return found
        before = whole._groups_before
        previous = before.get(name) if before is not None else None
        # a kept block's part is the one the previous group was made from while what the parts
        # read (their own nodes; the imports and model classes; the kinds of names) is the same
        if (reads_names or reads_kinds) and whole._names_before is not whole.names_key:
            previous = None
        if reads_kinds and whole._kinds_before is not whole.kinds:
            previous = None
        kinds = whole.kinds if reads_kinds else None

        def own(block: BlockIndex) -> dict[K, list[N]]:
            return whole.block_fact(block, name, part, kinds, reads_names=reads_names)

        def gone(block: BlockIndex) -> dict[K, list[N]]:
            made: dict[K, list[N]] = block.cached[name][2]
            return made  # what the previous version's group was made from

        found = Gathered.of(whole._blocks, own, previous, whole._change, gone_part=gone)
        whole._gathered_groups[name] = found
        return found

    def fact_before(self, name: str) -> tuple[Any, BlockChange] | None:
        """The fact `name` the previous version kept (`keep_fact`) and the change from it to
        this one: when few blocks changed, the others kept their order, and the imports, model
        classes and kinds of names are what they were (so the fact of every kept block is)."""
        whole = self.whole
        before = whole._kept_before
        change = whole._change
        if before is None or change is None or name not in before:
            return None
        if whole._names_before is not whole.names_key or whole._kinds_before is not whole.kinds:
            return None
        return before[name], change

    def keep_fact(self, name: str, value: Any) -> None:
        """Keep a fact for the next version to patch (see `fact_before`); it must not refer to
        this semantics."""
        self.whole._kept[name] = value

    def node_memo(self, name: str) -> dict[int, tuple[ast.AST, Any]]:
        """A memo of a fact of a node (by id, with the node: an entry answers only for the node
        it was made for) that reads the node's subtree and the file's imports and model classes
        alone: kept from version to version while those stay the same."""
        whole = self.whole
        memo = whole._node_memos.get(name)
        if memo is None:
            memo = whole._node_memos[name] = {}
        return memo

    @property
    def whole(self) -> Semantics:
        """The semantics of the whole file. A focused view (see `focused_on`) lists only the
        nodes of some blocks, for the rules to visit; facts about the file — what a function
        does, which functions zero gradients, what a name was assigned — come from the whole."""
        return self if self._whole is None else self._whole

    def focused_on(self, blocks: list[BlockIndex]) -> Semantics:
        """A view that lists the calls, loops, functions, classes and assignments of `blocks`
        only, and shares everything else (names, parents, kinds, caches) with this one."""
        view = Semantics(
            self.tree,
            imports=self.imports,
            parents=self.parents,
            methods_by_name=self.methods_by_name,
            plain_functions_by_name=self.plain_functions_by_name,
            module_classes=self.module_classes,
            kinds=self.kinds,
            _loops_cache=self._loops_cache,
            _dotted_cache=self._dotted_cache,
            _function_cache=self._function_cache,
            _kind_cache=self._kind_cache,
            _qualname_cache=self._qualname_cache,
            _whole=self,
            _focus=blocks,
        )
        for block in blocks:
            view.functions.extend(block.functions)
        view.calls_by_attr = Gathered([block.calls_by_attr for block in blocks])
        view.calls_by_name = Gathered([block.calls_by_name for block in blocks])
        view.calls_by_qualname = Gathered([self.qualnames_of(block) for block in blocks])
        return view

    def qualnames_of(self, block: BlockIndex) -> dict[str, list[ast.Call]]:
        """The block's calls by the imported name they call (the whole file's imports)."""
        found = block.qualnames
        imports = self.imports
        if found is None or (
            block.qualnames_imports is not imports and block.qualnames_imports != imports
        ):
            found = {}
            Name, Attribute = ast.Name, ast.Attribute  # as locals: read at every call
            for call in block.calls:
                # only a chain that starts at an imported name has one: most calls are
                # `self.f(...)`, `model(x)`, a local function; skip them before spelling them
                root = call.func
                if type(root) is Name:
                    target = imports.get(root.id)
                    if target is not None:  # `name(...)` calls what the name is bound to
                        found.setdefault(target, []).append(call)
                    continue
                if type(root) is not Attribute:
                    continue
                value = root.value
                if type(value) is Name:
                    # `x.f(...)`, most calls with a receiver: spelt without a climb
                    target = imports.get(value.id)
                    if target is not None:
                        found.setdefault(f"{target}.{root.attr}", []).append(call)
                    continue
                # the attributes are gathered on the way to the root: the qualname is spelt
                # from them, without a second climb for the dotted name
                attributes: list[str] = []
                while type(root) is Attribute:
                    attributes.append(root.attr)
                    root = root.value
                if type(root) is not Name:
                    continue
                target = imports.get(root.id)
                if target is None:
                    continue
                attributes.append(target)
                attributes.reverse()
                found.setdefault(".".join(attributes), []).append(call)
            block.qualnames = found
            block.qualnames_imports = imports  # never changed once merge_blocks returns
        return found

    # ---- name resolution -------------------------------------------------------------------
    def dotted(self, node: ast.AST) -> str | None:
        """`self.opt` for `self.opt`, `a.b.c` for an attribute chain of names; else None."""
        kind = type(node)
        if kind is ast.Name:
            return node.id  # type: ignore[attr-defined,no-any-return]  # an ast.Name: exact type test above (faster than isinstance on this hot path)
        if kind is not ast.Attribute:
            return None
        # memoised: rules ask for the same attribute chains many times
        cache = self._dotted_cache
        known: str | None = cache.get(node, _ABSENT)
        if known is not _ABSENT:
            return known
        found = cache[node] = dotted_name(node)
        return found

    def qualname(self, node: ast.AST) -> str | None:
        """The imported name an expression stands for: `F.relu` → `torch.nn.functional.relu`."""
        # only a chain that starts at an imported name has one: most asked (`self.model`,
        # `x.size`) are answered before a dotted name is spelt
        kind = type(node)
        if kind is ast.Name:
            return self.imports.get(node.id)  # type: ignore[attr-defined]  # type() tested above
        if kind is not ast.Attribute:
            return None
        root = node.value  # type: ignore[attr-defined]  # type() tested above
        while type(root) is ast.Attribute:
            root = root.value
        if type(root) is not ast.Name or root.id not in self.imports:
            return None
        dotted = self.dotted(node)
        if dotted is None:
            return None
        # memoised by name: `imports` is complete before the first call (build_semantics
        # records every import before it resolves any name)
        cache = self._qualname_cache
        if dotted in cache:
            return cache[dotted]
        head, _, rest = dotted.partition(".")
        target = self.imports.get(head)
        found = None if target is None else f"{target}.{rest}" if rest else target
        cache[dotted] = found
        return found

    def call_qualname(self, call: ast.Call) -> str | None:
        return self.qualname(call.func)

    def imported_packages(self) -> frozenset[str]:
        """The top-level packages the file's imports bind names from (`torch` for
        `from torch.nn import functional as F`)."""
        # memoised: `imports` is complete before the first call (see `qualname`), and several
        # rules ask for every file
        found = self._packages
        if found is None:
            found = self._packages = frozenset(
                qualname.partition(".")[0] for qualname in self.imports.values()
            )
        return found

    def imported_last_names(self) -> frozenset[str]:
        """The last parts of what the file's imports bind (`CrossEntropyLoss` for `from
        torch.nn import CrossEntropyLoss as CE`): with the names the file spells, every way it
        can refer to an imported class or function. Memoised as `imported_packages`."""
        found = self._last_names
        if found is None:
            found = self._last_names = frozenset(
                qualname.rpartition(".")[2] for qualname in self.imports.values()
            )
        return found

    def imports_framework_without_torch(self, frameworks: Collection[str]) -> bool:
        """The file imports one of `frameworks` (top-level package names) and nothing from
        torch: its loops follow that framework's rules, not torch's."""
        roots = self.imported_packages()
        return "torch" not in roots and not roots.isdisjoint(frameworks)

    def name_bound_to(self, target: str, *, plain_first: bool = False) -> str | None:
        """The name an import binds to exactly `target`: the first in `imports` (which is not
        source order), or with `plain_first` the target's own name when it is bound to it
        (`torch` rather than the `T` of an `import torch as T` beside `import torch`)."""
        imports = self.imports
        if plain_first and imports.get(target) == target:
            return target
        for name, bound in imports.items():
            if bound == target:
                return name
        return None

    def spelling(self, qualname: str) -> str | None:
        """Source text that names `qualname` through this file's imports, for a fix to write:
        the name imported for it, else the nearest imported package and the rest
        (`nn.ModuleList`, then `torch.nn.ModuleList`); None when no import reaches it."""
        module = qualname
        while True:
            name = self.name_bound_to(module)
            if name is not None:
                return name + qualname[len(module) :]
            module, dot, _ = module.rpartition(".")
            if not dot:
                return None

    def is_torch_name(self, node: ast.AST, *qualnames: str) -> bool:
        return self.qualname(node) in qualnames

    # ---- tree navigation ------------------------------------------------------------------
    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(node)

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        current = self.parents.get(node)
        while current is not None:
            yield current
            current = self.parents.get(current)

    def enclosing_loops(self, node: ast.AST) -> list[Loop]:
        """Loops around `node`, innermost first, stopping at the enclosing function or class.

        A node in a loop's `else:` or in its iterable is not part of an iteration. Memoised for
        every node on the way up too (rules ask this for most calls, and calls share their
        statements): the climb stops at the first ancestor already answered. The list is
        shared between nodes: callers read it, never change it.
        """
        cache = self._loops_cache
        found = cache.get(node)
        if found is not None:
            return found
        parents = self.parents
        path = [node]
        above: list[Loop] = []  # the loops around the parent of the path's last node
        parent = parents.get(node)
        while parent is not None and type(parent) not in SCOPE_OR_MODULE_TYPES:
            known = cache.get(parent)
            if known is not None:
                above = known
                break
            path.append(parent)
            parent = parents.get(parent)
        else:
            parent = None  # a function, the module or nothing above: no loop further up
        # down the path: each node's loops are its parent's, with the parent first when the
        # parent is a loop whose body holds the node
        loops = above
        for child in reversed(path):
            if (
                parent is not None
                and type(parent) in _LOOP_TYPES
                and in_loop_body(parent, child)  # type: ignore[arg-type]  # a loop: type() tested
            ):
                loops = [parent, *loops]  # type: ignore[list-item]  # a loop: type() tested
            cache[child] = loops
            parent = child
        return loops

    def enclosing_function(self, node: ast.AST) -> Function | None:
        """The function whose body holds `node`; None at module level, in a class body or in a
        lambda. Memoised for every node on the way up too: the climb stops at the first
        ancestor already answered."""
        cache = self._function_cache
        answered: Function | None = cache.get(node, _ABSENT)
        if answered is not _ABSENT:
            return answered
        parents = self.parents
        path = [node]
        found: Function | None = None
        parent = parents.get(node)
        while parent is not None:
            kind = type(parent)
            if kind in _FUNCTION_TYPES:
                found = parent  # type: ignore[assignment]  # type() tested above
                break
            if kind in _OTHER_SCOPE_TYPES:
                break
            known: Function | None = cache.get(parent, _ABSENT)
            if known is not _ABSENT:
                found = known
                break
            path.append(parent)
            parent = parents.get(parent)
        for child in path:
            cache[child] = found
        return found

    def enclosing_statement(self, node: ast.AST) -> ast.stmt | None:
        current: ast.AST | None = node
        while current is not None and not isinstance(current, ast.stmt):
            current = self.parents.get(current)
        return current

    def top_level_statement(self, node: ast.AST) -> ast.stmt | None:
        """The statement of the module's body that holds `node` (`node` itself when it is
        one); None for a node outside the module's statements."""
        current: ast.AST = node
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, ast.Module):
                return current if isinstance(current, ast.stmt) else None
            current = ancestor
        return None

    def in_loop(self, node: ast.AST, loop: Loop) -> bool:
        return loop in self.enclosing_loops(node)

    def in_no_grad(self, node: ast.AST) -> bool:
        """True under `with torch.no_grad()`/`inference_mode()`, or in a function decorated so."""
        # a climb by the parent links with exact type tests (the parser makes no subclasses),
        # no generator per ancestor or per item: most ancestors are neither
        parents = self.parents
        ancestor = parents.get(node)
        while ancestor is not None:
            kind = type(ancestor)
            if kind in _WITH_TYPES:
                for item in ancestor.items:  # type: ignore[attr-defined]  # type() tested above
                    if self.is_no_grad_context(item.context_expr):
                        return True
            elif kind in _FUNCTION_TYPES:
                for decorator in ancestor.decorator_list:  # type: ignore[attr-defined]  # type() tested above
                    if self.is_no_grad_context(decorator):
                        return True
                return False
            ancestor = parents.get(ancestor)
        return False

    def is_no_grad_context(self, expr: ast.AST) -> bool:
        target = expr.func if isinstance(expr, ast.Call) else expr
        name = self.qualname(target)
        if name is None or name not in NO_GRAD_CONTEXTS:
            return False
        if name == "torch.set_grad_enabled":
            return (
                isinstance(expr, ast.Call)
                and bool(expr.args)
                and isinstance(expr.args[0], ast.Constant)
                and expr.args[0].value is False
            )
        if name.endswith("inference_mode") and isinstance(expr, ast.Call) and expr.args:
            first = expr.args[0]
            return not (isinstance(first, ast.Constant) and first.value is False)
        return True

    # ---- what values are ------------------------------------------------------------------
    def kind_of(self, node: ast.AST) -> ValueKind | None:
        """What a name or attribute holds, from its assignments in this file, else its name."""
        dotted = self.dotted(node)
        if dotted is None:
            return None
        return self.kind_of_name(dotted)

    def kind_of_name(self, dotted: str) -> ValueKind | None:
        """What a dotted name holds (see `kind_of`)."""
        # memoised by name: rules ask about every call's callee, and `kinds` is complete once
        # build_semantics returns (nothing changes it afterwards)
        cache = self._kind_cache
        if dotted in cache:
            found = cache[dotted]
            if self.kind_reads is not None:
                self.kind_reads[dotted] = found
            return found
        found = self.kinds.get(dotted)
        if found is None:
            found = _kind_by_name(dotted.rsplit(".", 1)[-1])
        cache[dotted] = found
        if self.kind_reads is not None:
            self.kind_reads[dotted] = found
        return found

    def assigned_values(self, dotted: str) -> list[ast.expr]:
        """Every value assigned to a dotted name anywhere in the file (`self.scheduler` → its
        calls), augmented assignments left out."""
        return [assign.value for assign in self.assignments_to(dotted)]  # type: ignore[misc]  # assignments_to keeps those with a value

    def assignments_to(self, dotted: str) -> list[ast.Assign | ast.AnnAssign]:
        """The assignments with a value that bind a dotted name anywhere in the file, in source
        order (an assignment to it twice, `x = x = v`, listed twice)."""
        found = self.assignments_by_target().get(dotted)
        return found if found is not None else []

    def assignments_by_target(self) -> Mapping[str, list[ast.Assign | ast.AnnAssign]]:
        """The file's assignments with a value by each dotted name they bind (`assignments_to`),
        gathered block by block (an edit gathers the blocks it changed again)."""
        return self.gathered("semantics:assignments", _assignments_in_block)

    def is_optimizer(self, node: ast.AST) -> bool:
        return self.kind_of(node) is ValueKind.OPTIMIZER

    def method_calls(self, name: str) -> list[ast.Call]:
        return self.calls_by_attr.get(name, [])

    def calls_to(self, *qualnames: str) -> list[ast.Call]:
        """The calls of any of `qualnames`, name after name (each one's in source order): a
        new list, where a generator's frame cost more (most names asked for are not called)."""
        groups = self.calls_by_qualname
        found: list[ast.Call] = []
        for qualname in qualnames:
            calls = groups.get(qualname)
            if calls:
                found += calls
        return found


def in_loop_body(loop: Loop, child: ast.AST) -> bool:
    """`child` of `loop` is one of its body's statements: not its target, iterable, test or
    `else:` (what runs in the loop's iterations)."""
    if child in loop.orelse:
        return False
    if isinstance(loop, ast.While):
        return child is not loop.test
    return child is not loop.iter and child is not loop.target


@dataclass
class BlockIndex:
    """What one walk over a run of top-level statements finds: the part of `Semantics` that
    depends on those statements alone. An editor's next version reuses the index of every
    block it did not change (see incremental.py)."""

    statements: tuple[ast.stmt, ...]
    parents: dict[ast.AST, ast.AST]
    calls: list[ast.Call]
    calls_by_attr: dict[str, list[ast.Call]]
    calls_by_name: dict[str, list[ast.Call]]
    assigns: list[ast.Assign | ast.AnnAssign | ast.AugAssign]
    loops: list[Loop]
    functions: list[Function]
    classes: list[ast.ClassDef]
    # the statements (and walruses, functions, classes, lambdas) that bind names, in the
    # walk's order: grouped by scope when first asked for (`module_bindings`)
    binding_nodes: list[ast.AST]
    imports: list[ast.Import | ast.ImportFrom]
    # every name, attribute, parameter and keyword argument it mentions: where a dotted name
    # can appear
    identifiers: frozenset[str]
    # the attribute names among them (`x.name`)
    attribute_names: frozenset[str]
    # its attributes (`x.name`), in the walk's order
    attributes: list[ast.Attribute]
    # its functions by name: methods (defined in a class body), and the others
    methods_by_name: dict[str, list[Function]]
    plain_functions_by_name: dict[str, list[Function]]
    # the calls by qualname under the imports they were resolved with (see Semantics.qualnames_of)
    qualnames: dict[str, list[ast.Call]] | None = None
    qualnames_imports: dict[str, str] | None = None
    # the kinds its assignments and annotations give names (see _record_value_kinds)
    kinds: BlockKinds | None = None
    kinds_key: object = None
    # what the function summaries take from it (see summaries.BlockSummaries)
    summaries: Any = None
    # facts kept by Semantics.per_block: name → (the names key and the kinds they were found
    # under, the fact, the kinds of names it read when it reads kinds)
    cached: dict[str, tuple[object, object, Any, dict[str, ValueKind | None] | None]] = field(
        default_factory=dict
    )
    _bindings: tuple[list[ast.AST], dict[int, list[ast.AST]]] | None = field(
        default=None, repr=False
    )

    @property
    def module_bindings(self) -> list[ast.AST]:
        """The binding statements at module level, in the walk's order."""
        return self._scoped_bindings()[0]

    @property
    def scope_bindings(self) -> dict[int, list[ast.AST]]:
        """The binding statements of each function's body, by id of the function."""
        return self._scoped_bindings()[1]

    def _scoped_bindings(self) -> tuple[list[ast.AST], dict[int, list[ast.AST]]]:
        # grouped when first asked for: most files' rules build no data flow (each binding's
        # scope is found by a climb, a fifth of the work after the walk)
        found = self._bindings
        if found is None:
            found = self._bindings = _bindings_by_scope(self.binding_nodes, self.parents)
        return found


CacheKey = TypeVar("CacheKey")

# What a node cache's `get` answers for a node it holds no answer for (None is an answer).
_ABSENT: Any = object()

# Stands for the module while a block is indexed without it.
_MODULE_SCOPE = ast.Module(body=[], type_ignores=[])


def _binding_scope(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.AST | None:
    """The scope whose local data flow sees what `node` binds: the module (a top-level
    statement has no parent in its block's index), the function whose body holds it, or
    None in a class body, a lambda, or a function's header (decorators, defaults)."""
    child = node
    parent = parents.get(child)
    while parent is not None:
        kind = type(parent)
        if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            # a function's body holds statements; its header, expressions and arguments
            return parent if isinstance(child, ast.stmt) else None
        if kind is ast.ClassDef or kind is ast.Lambda:
            return None
        child = parent
        parent = parents.get(child)
    return _MODULE_SCOPE


def index_block(statements: tuple[ast.stmt, ...] | list[ast.stmt]) -> BlockIndex:
    statements = tuple(statements)
    parents: dict[ast.AST, ast.AST] = {}
    calls: list[ast.Call] = []
    assigns: list[ast.Assign | ast.AnnAssign | ast.AugAssign] = []
    loops: list[Loop] = []
    functions: list[Function] = []
    classes: list[ast.ClassDef] = []
    binding_nodes: list[ast.AST] = []
    imports: list[ast.Import | ast.ImportFrom] = []
    identifiers: set[str] = set()
    attributes: set[str] = set()
    # One walk records parents, indexes the nodes rules ask about, and lists the statements
    # that bind names in each scope (what dataflow needs, without walking again). It goes
    # breadth first over a list that grows as it is read: no stack to pop, no children to
    # reverse (17% less time than a depth-first walk over the corpus); what it collects is put
    # in source order afterwards, and grouped (by callee, by scope) in that order, so no group
    # needs a sort of its own. The scope of a binding is found by climbing its parents (a step
    # or two), which costs less than carrying a scope with every node of the file. A name met
    # as a child where most are (a callee, an argument, a receiver, a field) is recorded there
    # and a constant left there, not put on the list: a third of all nodes, each a trip through
    # the loop less (4% of the walk over the corpus).
    nodes: list[ast.AST] = list(statements)
    push = nodes.append
    mention = identifiers.add
    mention_attribute = attributes.add
    attribute_nodes: list[ast.Attribute] = []
    record_attribute = attribute_nodes.append
    # What the loop reads at every node, as locals (a local is read in one step, where
    # `ast.Name` is a global and an attribute, `getattr` a builtin): the node types it tests,
    # the fields table and the indexed types, getattr and list. A tenth less time for the
    # walk of a freshly parsed 134-line file.
    Name, Constant, Attribute, Call, keyword = (
        ast.Name,
        ast.Constant,
        ast.Attribute,
        ast.Call,
        ast.keyword,
    )
    arg, While, Import, ImportFrom, ClassDef, Lambda = (
        ast.arg,
        ast.While,
        ast.Import,
        ast.ImportFrom,
        ast.ClassDef,
        ast.Lambda,
    )
    fields_of, indexed, read, List = CHILD_FIELDS.get, _INDEXED, getattr, list
    for node in nodes:
        kind = type(node)
        if kind is Name:
            mention(node.id)  # type: ignore[attr-defined]  # type() tested above: faster than isinstance here
            continue  # nothing below a name but its context
        if kind is Constant:
            continue  # a ninth of all nodes: nothing below it, nothing to record
        if kind is Attribute:
            # a ninth of all nodes, with one child: read without the loop over fields
            mention_attribute(node.attr)  # type: ignore[attr-defined]  # type() tested above: faster than isinstance here
            record_attribute(node)  # type: ignore[arg-type]  # type() tested above
            value = node.value  # type: ignore[attr-defined]  # type() tested above: faster than isinstance here
            parents[value] = node
            if type(value) is Name:
                mention(value.id)
            else:
                push(value)
            continue
        if kind is Call:
            # a tenth of all nodes: its three fields read directly
            calls.append(node)  # type: ignore[arg-type]  # type() tested above: faster than isinstance here
            func = node.func  # type: ignore[attr-defined]  # type() tested above: faster than isinstance here
            parents[func] = node
            if type(func) is Name:
                mention(func.id)
            else:
                push(func)
            for item in node.args:  # type: ignore[attr-defined]  # type() tested above: faster than isinstance here
                parents[item] = node
                child = type(item)
                if child is Name:
                    mention(item.id)
                elif child is not Constant:
                    push(item)
            for item in node.keywords:  # type: ignore[attr-defined]  # type() tested above: faster than isinstance here
                parents[item] = node
                push(item)
            continue
        if kind is keyword:
            if node.arg is not None:  # type: ignore[attr-defined]  # type() tested above: faster than isinstance here
                mention(node.arg)  # type: ignore[attr-defined]  # type() tested above: faster than isinstance here
            value = node.value  # type: ignore[attr-defined]  # type() tested above: faster than isinstance here
            parents[value] = node
            child = type(value)
            if child is Name:
                mention(value.id)
            elif child is not Constant:
                push(value)
            continue
        fields = fields_of(kind)
        if fields is None:
            fields = child_fields(kind)
        if kind in indexed:  # one look-up spares most nodes the chain of tests below
            if kind is arg:
                mention(node.arg)  # type: ignore[attr-defined]  # type() tested above: faster than isinstance here
            elif kind in _BINDING_STATEMENTS:
                binding_nodes.append(node)
                if kind in _ASSIGNMENTS:
                    assigns.append(node)  # type: ignore[arg-type]  # type() tested above: faster than isinstance here
                elif kind in _LOOPS:
                    loops.append(node)  # type: ignore[arg-type]  # type() tested above: faster than isinstance here
            elif kind in _SCOPES:
                binding_nodes.append(node)  # its name is bound where it is defined
                if kind is ClassDef:
                    classes.append(node)  # type: ignore[arg-type]  # type() tested above: faster than isinstance here
                elif kind is not Lambda:
                    functions.append(node)  # type: ignore[arg-type]  # type() tested above: faster than isinstance here
            elif kind is While:
                loops.append(node)  # type: ignore[arg-type]  # type() tested above: faster than isinstance here
            elif kind is Import or kind is ImportFrom:
                imports.append(node)  # type: ignore[arg-type]  # type() tested above: faster than isinstance here
        for name in fields:
            value = read(node, name, None)
            if type(value) is List:
                for item in value:
                    # None holes: `{**d}`'s key, a keyword-only argument without a default
                    if item is not None:
                        parents[item] = node
                        push(item)
            elif value is not None:
                parents[value] = node
                child = type(value)
                if child is Name:
                    mention(value.id)
                elif child is not Constant:
                    push(value)
    # the walk is breadth first: what it collected is put in source order
    _sort_by_start(calls)
    _sort_by_start(loops)
    _sort_by_start(functions)
    _sort_by_start(classes)
    _sort_by_start(assigns)
    _sort_by_start(imports)
    calls_by_attr: dict[str, list[ast.Call]] = {}
    calls_by_name: dict[str, list[ast.Call]] = {}
    for call in calls:
        func = call.func
        if type(func) is Attribute:
            groups, callee = calls_by_attr, func.attr
        elif type(func) is Name:
            groups, callee = calls_by_name, func.id
        else:
            continue
        group = groups.get(callee)
        if group is None:
            groups[callee] = [call]
        else:
            group.append(call)
    methods_by_name: dict[str, list[Function]] = {}
    plain_functions_by_name: dict[str, list[Function]] = {}
    for function in functions:
        into = (
            methods_by_name if type(parents.get(function)) is ClassDef else plain_functions_by_name
        )
        into.setdefault(function.name, []).append(function)
    identifiers.update(attributes)  # every name it mentions, attributes among them
    return BlockIndex(
        statements,
        parents,
        calls,
        calls_by_attr,
        calls_by_name,
        assigns,
        loops,
        functions,
        classes,
        binding_nodes,
        imports,
        frozenset(identifiers),
        frozenset(attributes),
        attribute_nodes,
        methods_by_name,
        plain_functions_by_name,
    )


def _bindings_by_scope(
    binding_nodes: list[ast.AST], parents: dict[ast.AST, ast.AST]
) -> tuple[list[ast.AST], dict[int, list[ast.AST]]]:
    """A block's binding statements at module level, and those of each function by id. They
    stay in the walk's order: the data flow sorts each name's bindings by position (two
    bindings never share one but in the same statement), and the other readers of these lists
    ask whether any statement binds a name. `parents` may give the block's top-level statements
    the module as their parent (build_semantics): the climb passes it as it passes no parent."""
    bindings: dict[int, list[ast.AST]] = defaultdict(list)
    for node in binding_nodes:
        scope = _binding_scope(node, parents)
        if scope is not None:
            bindings[id(scope)].append(node)
    module_bindings = bindings.pop(id(_MODULE_SCOPE), [])
    return module_bindings, dict(bindings)


def build_semantics(tree: ast.Module) -> Semantics:
    """The semantics of a file analysed once, as a whole (not version after version): what
    `merge_blocks` makes of the file's one block, without the merging. The block's parent
    links, lists and groups serve as the file's, uncopied: no later version patches them, no
    other semantics shares the block, and nothing writes to them (its top-level statements
    gain the module as their parent, as a merge gives them); the rules read the groups' dicts
    themselves, a look-up in C where `Gathered.get` is a call in Python."""
    block = index_block(tree.body)
    sem = Semantics(tree, _blocks=[block], one_shot=True)
    parents = sem.parents = block.parents
    for statement in block.statements:
        parents[statement] = tree
    sem.functions = block.functions
    sem.import_statements = block.imports
    # set now, not made when first asked for: a cached property's first read takes a lock
    sem.calls = block.calls
    sem.assigns = block.assigns
    sem.loops = block.loops
    sem.classes = block.classes
    _record_imports(sem)
    _find_module_classes(sem)
    sem.names_key = _names_key(sem)
    sem.calls_by_attr = block.calls_by_attr
    sem.calls_by_name = block.calls_by_name
    sem.calls_by_qualname = sem.qualnames_of(block)
    sem.methods_by_name = block.methods_by_name
    sem.plain_functions_by_name = block.plain_functions_by_name
    _record_value_kinds(sem, [block])
    return sem


def merge_blocks(
    tree: ast.Module,
    blocks: list[BlockIndex],
    previous: Semantics | None = None,
) -> Semantics:
    """The semantics of a module whose body is the blocks' statements, in order. With the
    semantics of the previous version of the file, its parent links are taken over and
    changed where blocks came and went (40,000 links on 3,000 lines: building them again costs
    more than the rest of an edit), which leaves the previous version's links wrong; so are
    the file-wide facts that the blocks an edit changed leave as they were. A file analysed
    once is built by `build_semantics`."""
    sem = Semantics(tree, _blocks=blocks)
    change: BlockChange | None = None
    if previous is not None:
        change = BlockChange.between(previous._blocks, blocks)
        parents = sem.parents = previous.parents
        previous.parents = {}
        # the facts derived from the previous version refer back to it (summaries keep their
        # semantics): dropped, the whole version is freed by reference counting instead of
        # waiting, with hundreds of thousands of objects, for the cyclic collector
        previous.derived.clear()
        # a node's enclosing loops and function lie in its own top-level block, and its dotted
        # name in its own subtree: the answers for the blocks an edit left alone stay true
        loops_cache = _carried(previous._loops_cache, parents)
        function_cache = _carried(previous._function_cache, parents)
        dotted_cache = _carried(previous._dotted_cache, parents)
        for gone in change.gone:
            for node in gone.parents:
                parents.pop(node, None)
                loops_cache.pop(node, None)
                function_cache.pop(node, None)
                dotted_cache.pop(node, None)
            for statement in gone.statements:
                parents.pop(statement, None)
                loops_cache.pop(statement, None)
                function_cache.pop(statement, None)
        sem._loops_cache, sem._function_cache = loops_cache, function_cache
        sem._dotted_cache = dotted_cache
        added = change.added
    else:
        parents = sem.parents
        added = blocks
    for block in added:
        parents.update(block.parents)
    for block in blocks:
        for statement in block.statements:
            parents[statement] = tree
    # the blocks an edit changed, when few and the others kept their order: the rest of the
    # file's lists and groups stay as they were
    patch = change if change is not None and change.patchable(len(blocks)) else None
    if previous is not None:
        # groups the previous version made are patched when first asked for, then dropped
        sem._groups_before, sem._change = previous._gathered_groups, patch
        previous._groups_before = None
        sem._kept_before = previous._kept
        previous._kept_before = None
    sem.functions = sem.gathered("semantics:functions", _functions_of).get("", [])
    sem.import_statements = sem.gathered("semantics:imports", _imports_of).get("", [])
    bindings = sem._bindings_by_scope = defaultdict(list)
    if patch is not None and previous is not None:
        bindings.update(previous.bindings_by_scope)
        bindings.pop(id(previous.tree), None)
        for block in patch.gone:
            for scope in block.scope_bindings:
                bindings.pop(scope, None)
        for block in patch.added:
            bindings.update(block.scope_bindings)
    else:
        for block in blocks:
            bindings.update(block.scope_bindings)
    bindings[id(tree)] = sem.gathered("semantics:module-bindings", _module_bindings_of).get("", [])
    _record_imports(sem)
    # in the same order too: `name_bound_to` answers with the first name bound to a target
    imports_kept = previous is not None and list(previous.imports.items()) == list(
        sem.imports.items()
    )
    if imports_kept:
        assert previous is not None
        sem.imports = previous.imports  # the same object: blocks compare it by identity
        sem._qualname_cache = previous._qualname_cache  # a name means what it meant
    if imports_kept and patch is not None and not patch.touches_classes():
        assert previous is not None
        sem.module_classes = previous.module_classes  # no class came or went, no base changed
    else:
        _find_module_classes(sem)
    names_key = _names_key(sem)
    if previous is not None and previous.names_key == names_key:
        names_key = previous.names_key
    sem.names_key = names_key
    if previous is not None:
        sem._names_before = previous.names_key
    # the calls, patched from the previous version's (by qualname while the names stay)
    sem.calls_by_attr = sem.gathered("semantics:calls-by-attr", _calls_by_attr_of)
    sem.calls_by_name = sem.gathered("semantics:calls-by-name", _calls_by_name_of)
    sem.calls_by_qualname = sem.gathered(
        "semantics:calls-by-qualname", _calls_by_qualname_of, reads_names=True
    )
    sem.methods_by_name = sem.gathered("semantics:methods-by-name", _methods_by_name_of)
    sem.plain_functions_by_name = sem.gathered(
        "semantics:plain-functions-by-name", _plain_functions_by_name_of
    )
    if previous is not None:
        if names_key is previous.names_key:
            # a node's facts that read its subtree and these names stay true
            sem._node_memos = {
                name: _carried(memo, sem.parents) for name, memo in previous._node_memos.items()
            }
    if previous is not None and names_key is previous.names_key and patch is not None:
        _patch_value_kinds(sem, previous, patch)
    else:
        _record_value_kinds(sem, blocks)
    if previous is not None:
        sem._kinds_before = previous.kinds
    return sem


# the name under which each version keeps its answers to `Semantics.mentions`
_MENTIONS = "semantics:mentions"


# A block's parts of the file's groups (see Semantics.gathered).
def _calls_by_attr_of(sem: Semantics, block: BlockIndex) -> dict[str, list[ast.Call]]:
    return block.calls_by_attr


def _calls_by_name_of(sem: Semantics, block: BlockIndex) -> dict[str, list[ast.Call]]:
    return block.calls_by_name


def _calls_by_qualname_of(sem: Semantics, block: BlockIndex) -> dict[str, list[ast.Call]]:
    return sem.qualnames_of(block)


def _methods_by_name_of(sem: Semantics, block: BlockIndex) -> dict[str, list[Function]]:
    return block.methods_by_name


def _plain_functions_by_name_of(sem: Semantics, block: BlockIndex) -> dict[str, list[Function]]:
    return block.plain_functions_by_name


def _functions_of(sem: Semantics, block: BlockIndex) -> dict[str, list[Function]]:
    return {"": block.functions} if block.functions else {}


def _imports_of(sem: Semantics, block: BlockIndex) -> dict[str, list[ast.Import | ast.ImportFrom]]:
    return {"": block.imports} if block.imports else {}


def _module_bindings_of(sem: Semantics, block: BlockIndex) -> dict[str, list[ast.AST]]:
    return {"": block.module_bindings} if block.module_bindings else {}


@dataclass
class BlockChange:
    """The blocks a version dropped and added against the previous one, with their places."""

    gone: list[BlockIndex]
    gone_at: list[int]  # places in the previous version's blocks
    added: list[BlockIndex]
    added_at: list[int]  # places in this version's
    # the kept blocks stand in the order they had: a block reused for another with the same
    # text (two identical lines swapped) can change it, and then nothing can be patched
    in_order: bool

    @classmethod
    def between(cls, before: list[BlockIndex], after: list[BlockIndex]) -> BlockChange:
        # the runs of the same blocks at both ends, compared by identity in C: an edit changes
        # one block or a few of hundreds
        shorter = min(len(before), len(after))
        same_start = list(map(operator.is_, before[:shorter], after[:shorter]))
        first = same_start.index(False) if False in same_start else shorter
        same_end = list(map(operator.is_, reversed(before[first:]), reversed(after[first:])))
        kept_at_end = same_end.index(False) if False in same_end else len(same_end)
        old_middle = before[first : len(before) - kept_at_end]
        new_middle = after[first : len(after) - kept_at_end]
        had = {id(block): place for place, block in enumerate(old_middle, first)}
        kept_places: list[int] = []
        added: list[BlockIndex] = []
        added_at: list[int] = []
        for place, block in enumerate(new_middle, first):
            old = had.pop(id(block), None)
            if old is None:
                added.append(block)
                added_at.append(place)
            else:
                kept_places.append(old)
        gone_at = sorted(had.values())
        in_order = all(a < b for a, b in zip(kept_places, kept_places[1:], strict=False))
        return cls([before[place] for place in gone_at], gone_at, added, added_at, in_order)

    def patchable(self, count: int) -> bool:
        """Few enough blocks changed, and the others kept their order."""
        return self.in_order and len(self.gone) + len(self.added) <= count // 4

    def in_place(self) -> bool:
        """Each changed block took the place of one that went."""
        return self.in_order and self.gone_at == self.added_at

    def touches_classes(self) -> bool:
        return any(block.classes for block in (*self.gone, *self.added))


class Gathered(Mapping[K, list[N]]):
    """Nodes by a key (calls by the attribute they call or the qualname they resolve to,
    functions by name) over the blocks' own groupings, in source order. Made from the previous
    version's, only the keys of the blocks an edit removed or added are gathered again: merging
    every block's groups into one dict on every edit cost more than the rest of the merge."""

    __slots__ = ("_every",)

    def __init__(self, parts: list[dict[K, list[N]]]) -> None:
        # a file analysed in one piece has one part: its groups serve as they are, uncopied
        # (nothing writes to a group; a later version patches copies, see `of`)
        self._every = parts[0] if len(parts) == 1 else self._merged(parts)

    @classmethod
    def of(
        cls,
        blocks: list[BlockIndex],
        part: Callable[[BlockIndex], dict[K, list[N]]],
        previous: Gathered[K, N] | None,
        change: BlockChange | None,
        gone_part: Callable[[BlockIndex], dict[K, list[N]]] | None = None,
    ) -> Gathered[K, N]:
        """The blocks' groups, patched from `previous` by `change` when there is one (a gone
        block's groups are those `gone_part` gives, `part` when none is given)."""
        if previous is None or change is None:
            return cls([part(block) for block in blocks])
        gone = [(gone_part or part)(block) for block in change.gone]
        added = [part(block) for block in change.added]
        gathered = cls.__new__(cls)
        every = dict(previous._every)
        for key in {key for group in (*gone, *added) for key in group}:
            # each block's nodes are one run of the list: a removed block's run is cut out
            # where its first node is; the kept nodes keep their order (an edit moves whole
            # blocks), and an added block's run goes in where its lines are
            calls = list(every.get(key, ()))
            for group in gone:
                block_calls = group.get(key)
                if block_calls:
                    at = calls.index(block_calls[0])
                    del calls[at : at + len(block_calls)]
            for group in added:
                block_calls = group.get(key)
                if block_calls:
                    at = bisect.bisect_left(calls, position(block_calls[0]), key=position)
                    calls[at:at] = block_calls
            if calls:
                every[key] = calls
            else:
                every.pop(key, None)
        gathered._every = every
        return gathered

    @staticmethod
    def _merged(parts: list[dict[K, list[N]]]) -> dict[K, list[N]]:
        every: dict[K, list[N]] = {}
        for part in parts:
            for key, calls in part.items():
                found = every.get(key)
                if found is None:
                    every[key] = list(calls)
                else:
                    found.extend(calls)
        return every

    def __getitem__(self, key: K) -> list[N]:
        return self._every[key]

    def get(self, key: K, default: Any = None) -> Any:
        return self._every.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._every

    def __iter__(self) -> Iterator[K]:
        return iter(self._every)

    def __len__(self) -> int:
        return len(self._every)

    def keys(self) -> KeysView[K]:
        return self._every.keys()  # the dict's own view: set operations on it run in C

    def items(self) -> ItemsView[K, list[N]]:
        return self._every.items()

    def values(self) -> ValuesView[list[N]]:
        return self._every.values()


def _carried(cache: dict[CacheKey, Any], parents: dict[ast.AST, ast.AST]) -> dict[CacheKey, Any]:
    """A node cache for the next version; started afresh once it holds many more entries than
    the file has nodes (answers about nodes outside the tree: each entry keeps its node)."""
    return cache if len(cache) <= 2 * len(parents) + 1024 else {}


# Statements (and the walrus) that bind a name in the scope they run in.
_ASSIGNMENTS = frozenset({ast.Assign, ast.AnnAssign, ast.AugAssign})
_LOOPS = frozenset({ast.For, ast.AsyncFor})
_BINDING_STATEMENTS = _ASSIGNMENTS | _LOOPS | {ast.With, ast.AsyncWith, ast.NamedExpr}
_SCOPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda})
# the node types index_block records something about
_INDEXED = frozenset(
    {ast.arg, ast.While, ast.Import, ast.ImportFrom} | _BINDING_STATEMENTS | _SCOPES
)


# where a located node starts: the key of the walk's sorts, read in C
_start: Callable[[ast.AST], tuple[int, int]] = operator.attrgetter("lineno", "col_offset")


_line: Callable[[ast.AST], int] = operator.attrgetter("lineno")
_column: Callable[[ast.AST], int] = operator.attrgetter("col_offset")


def _sort_by_start(nodes: list[N]) -> None:
    """Sort located nodes in place by where they start, as `nodes.sort(key=_start)` does: two
    stable sorts, by column and then by line, leave the same order (a tie on both keeps the
    walk's order), in a quarter less time, since CPython compares a list of small ints without
    calling their comparison, where tuples are compared item by item."""
    nodes.sort(key=_column)
    nodes.sort(key=_line)


def call_order(call: ast.Call) -> tuple[int, int, int, int]:
    """The order of a file's call list (`Semantics.calls`), for calls picked from its groups:
    by start, and of two calls that start together (`f(x).g()`), the outer first (it ends
    later)."""
    return (call.lineno, call.col_offset, -(call.end_lineno or 0), -(call.end_col_offset or 0))


def position(node: ast.AST) -> tuple[int, int]:
    """Where a node starts, (0, 0) for one without a position: the key of source order."""
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def end_position(node: ast.stmt | ast.expr) -> tuple[int, int]:
    """Where a located node ends (its start line when the parser gave no end)."""
    return (node.end_lineno or node.lineno, node.end_col_offset or 0)


def starting_within(
    nodes: Sequence[N], start: tuple[int, int], end: tuple[int, int]
) -> Sequence[N]:
    """Of `nodes` (located ones, in source order), those that start in [`start`, `end`), in
    order: a run of them found by two bisections in C, not by asking each of the list."""
    first = bisect.bisect_left(nodes, start, key=_start)
    return nodes[first : bisect.bisect_left(nodes, end, first, key=_start)]


def dotted_name(node: ast.AST) -> str | None:
    """`a.b.c` for an attribute chain that starts at a name; else None (not memoised: use
    `Semantics.dotted` for nodes of the analysed tree)."""
    # exact type tests: the parser makes no subclasses, and this runs for most callees
    if type(node) is ast.Name:
        return node.id
    parts: list[str] = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    parts.append(node.id)
    parts.reverse()
    return ".".join(parts)


def _record_imports(sem: Semantics) -> None:
    # Recorded last to first: when a name is imported twice, the first import is what it means.
    for import_node in reversed(sem.import_statements):
        _record_import(sem, import_node)


def _names_key(sem: Semantics) -> object:
    """The imports and model classes: what the blocks' facts that read names are kept under."""
    return (tuple(sem.imports.items()), tuple(sem.module_classes))


def _record_import(sem: Semantics, node: ast.Import | ast.ImportFrom) -> None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                sem.imports[alias.asname] = alias.name
            else:
                # `import torch.nn` binds `torch`, through which `torch.nn` is reached
                head = alias.name.split(".", 1)[0]
                sem.imports[head] = head
        return
    if node.level or node.module is None:
        return
    for alias in node.names:
        if alias.name == "*":
            continue
        sem.imports[alias.asname or alias.name] = f"{node.module}.{alias.name}"


def _find_module_classes(sem: Semantics) -> None:
    """nn.Module subclasses, including subclasses of this file's own subclasses."""
    # each base resolved once: (a torch module base, the local name it may be)
    classes = []
    for cls in sem.classes:
        bases = []
        for base in cls.bases:
            qualname = sem.qualname(base)
            bases.append((qualname is not None and _is_module_base(qualname), sem.dotted(base)))
        classes.append((cls, bases))
    module_classes = sem.module_classes
    changed = True
    while changed:
        changed = False
        for cls, bases in classes:
            if cls.name in module_classes:
                continue
            for from_torch, dotted in bases:
                if from_torch or (dotted is not None and dotted in module_classes):
                    module_classes[cls.name] = cls
                    changed = True
                    break


def _is_module_base(qualname: str) -> bool:
    if qualname in MODULE_BASES:
        return True
    # nn.Sequential, nn.ModuleList and every other torch.nn class are modules too
    head, _, last = qualname.rpartition(".")
    return head in ("torch.nn", "torch.nn.modules") and last[:1].isupper()


# What a block's assignments and annotations say names hold: a kind, or "what this other name
# holds" (`model = net.to(device)`), resolved in source order across the blocks.
KindSource = ValueKind | str
BlockKinds = tuple[list[tuple[tuple[str, ...], KindSource]], list[tuple[str, ValueKind]]]


def _assignments_in_block(
    sem: Semantics, block: BlockIndex
) -> dict[str, list[ast.Assign | ast.AnnAssign]]:
    index: dict[str, list[ast.Assign | ast.AnnAssign]] = {}
    # exact type tests, and the plain name of most targets (`x = ...`) read in place: a file
    # whose assignments by name are asked for passes every assignment here
    Assign, AugAssign, Name = ast.Assign, ast.AugAssign, ast.Name
    for assign in block.assigns:
        kind = type(assign)
        if kind is Assign:
            targets = assign.targets  # type: ignore[union-attr]  # type() tested above
        elif kind is AugAssign or assign.value is None:
            continue
        else:
            targets = [assign.target]  # type: ignore[union-attr]  # an AnnAssign: type() tested
        for target in targets:
            name = target.id if type(target) is Name else dotted_name(target)
            if name is None:
                continue
            group = index.get(name)
            if group is None:
                index[name] = [assign]  # type: ignore[list-item]  # type() tested above
            else:
                group.append(assign)  # type: ignore[arg-type]  # type() tested above
    return index


def _record_value_kinds(sem: Semantics, blocks: list[BlockIndex]) -> None:
    # the blocks' facts depend on the file's imports and model classes only
    key = sem.names_key
    kinds = sem.kinds
    annotated: list[tuple[str, ValueKind]] = []
    for block in blocks:
        assigned, block_annotated = _kinds_of_block(sem, block, key)
        for targets, source in assigned:
            kind = source if isinstance(source, ValueKind) else kinds.get(source)
            if kind is not None:
                for dotted in targets:
                    kinds[dotted] = kind
        annotated.extend(block_annotated)
    for name, kind in annotated:
        kinds.setdefault(name, kind)


def _patch_value_kinds(sem: Semantics, previous: Semantics, change: BlockChange) -> None:
    """The previous version's kinds (the same dict, and what was read from it) when each block
    an edit changed says what the block it replaced said; else all found again."""
    key = sem.names_key
    if change.in_place() and all(
        gone.kinds_key is key and gone.kinds == _kinds_of_block(sem, added, key)
        for gone, added in zip(change.gone, change.added, strict=True)
    ):
        sem.kinds = previous.kinds
        sem._kind_cache = previous._kind_cache
        return
    _record_value_kinds(sem, sem._blocks)


def _kinds_of_block(sem: Semantics, block: BlockIndex, key: object) -> BlockKinds:
    found = block.kinds
    if found is None or (block.kinds_key is not key and block.kinds_key != key):
        found = block.kinds = _block_kinds(sem, block)
        block.kinds_key = key
    return found


def _block_kinds(sem: Semantics, block: BlockIndex) -> BlockKinds:
    # exact type tests throughout (the parser makes no subclasses): every assignment of a
    # call's result and every annotated parameter of the file passes here
    made = _kinds_made_by_calls(sem, block)
    assigned: list[tuple[tuple[str, ...], KindSource]] = []
    for assign in block.assigns:
        # only a call gives a kind: the other values are passed over before any call
        value = assign.value
        if type(value) is not ast.Call or type(assign) is ast.AugAssign:
            continue
        source = _kind_source(sem, value, made)
        if source is None:
            continue
        if type(assign) is ast.Assign and len(assign.targets) > 1:
            names = tuple(
                name for target in assign.targets if (name := dotted_name(target)) is not None
            )
        else:
            # one target: most assignments
            target = assign.targets[0] if type(assign) is ast.Assign else assign.target  # type: ignore[union-attr]  # type() tested
            name = dotted_name(target)
            names = () if name is None else (name,)
        if names:
            assigned.append((names, source))
    annotated: list[tuple[str, ValueKind]] = []
    imports = sem.imports
    for function in block.functions:
        arguments = function.args
        for parameters in (arguments.posonlyargs, arguments.args, arguments.kwonlyargs):
            for arg in parameters:
                written = arg.annotation
                if written is None:
                    continue
                if type(written) is ast.Name:
                    # most annotations (`int`, `str`): `qualname` and `dotted` read in place
                    annotation = imports.get(written.id) or written.id
                else:
                    annotation = sem.qualname(written) or sem.dotted(written) or ""
                if annotation.endswith("Optimizer"):
                    annotated.append((arg.arg, ValueKind.OPTIMIZER))
                elif annotation.endswith("DataLoader"):
                    annotated.append((arg.arg, ValueKind.LOADER))
                elif annotation.endswith("Module") or annotation in sem.module_classes:
                    annotated.append((arg.arg, ValueKind.MODEL))
    return assigned, annotated


def _kinds_made_by_calls(sem: Semantics, block: BlockIndex) -> dict[ast.Call, ValueKind]:
    """The block's calls of imported names that make a kind of value (`nn.Linear(...)`), read
    off its calls by qualname: one look-up per name called, not a climb per call."""
    made: dict[ast.Call, ValueKind] = {}
    for qualname, calls in sem.qualnames_of(block).items():
        kind = _kind_of_qualname(qualname)
        if kind is not None:
            for call in calls:  # one or two, mostly
                made[call] = kind
    return made


def _kind_source(
    sem: Semantics, value: ast.Call, made: dict[ast.Call, ValueKind]
) -> KindSource | None:
    """A kind, the name whose kind the value keeps, or None; `made` is the kinds that the
    block's calls of imported names make (see `_kinds_made_by_calls`)."""
    func = value.func
    kind = type(func)  # exact types: the parser makes no subclasses
    if kind is ast.Attribute and func.attr in _MOVES:  # type: ignore[attr-defined]  # type() tested
        # `model = model.to(device)`, `net = Net().cuda()` keep what the receiver is
        receiver = func.value  # type: ignore[attr-defined]  # type() tested above
        if type(receiver) is ast.Call:
            return _kind_source(sem, receiver, made)
        return dotted_name(receiver)
    if kind is ast.Name and func.id in sem.module_classes:  # type: ignore[attr-defined]  # type() tested
        return ValueKind.MODEL
    # a call whose callee starts at no imported name has no qualname, and makes no kind
    return made.get(value)


_MOVES = frozenset({"to", "cuda", "cpu", "train", "eval"})


@lru_cache(maxsize=4096)
def _kind_of_qualname(qualname: str) -> ValueKind | None:
    """What calling the imported `qualname` makes; a pure function of the name, kept for the
    names every file calls again (`torch.cat`, `nn.Linear`)."""
    last = qualname.rsplit(".", 1)[-1]
    # before the model factories: `transformers.get_linear_schedule_with_warmup` is under a
    # package whose every other export is taken for a model
    if "schedul" in qualname.lower():
        return ValueKind.SCHEDULER
    if qualname.startswith(OPTIMIZER_PACKAGES) and last[:1].isupper() and last != "Optimizer":
        return ValueKind.OPTIMIZER
    if qualname in OPTIMIZER_FACTORIES:
        return ValueKind.OPTIMIZER
    if qualname in LOADER_CLASSES:
        return ValueKind.LOADER
    if "Sampler" in last and qualname.startswith("torch.utils.data"):
        return ValueKind.SAMPLER
    if qualname.startswith("torch.nn.") and last.endswith("Loss"):
        return ValueKind.CRITERION
    if qualname.startswith("torch.nn.") and last[:1].isupper() and "functional" not in qualname:
        return ValueKind.MODEL
    if qualname.startswith(MODEL_FACTORIES):
        return ValueKind.MODEL
    return None


def is_zeroing(sem: Semantics, node: ast.AST) -> bool:
    """`opt.zero_grad()`, `model.zero_grad()`, `p.grad = None`, `p.grad.zero_()` and kin."""
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if "zero_grad" in name:
            return True
        if isinstance(func, ast.Attribute) and name in ("zero_", "fill_", "detach_", "mul_"):
            return _mentions_grad(func.value)
        return False
    if isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Attribute) and t.attr == "grad" for t in targets)
    return False


def _mentions_grad(node: ast.AST) -> bool:
    while isinstance(node, ast.Attribute):
        if node.attr == "grad":
            return True
        node = node.value
    return False
