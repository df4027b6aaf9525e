"""Submodules the model uses but does not own: modules kept in plain lists, tuples, sets and
dicts (or set with object.__setattr__), which `named_modules()` never lists.

Loaded by runner/ from the file next to it; it imports only the standard library and torch.

They run in forward (their FLOPs are counted) but their parameters are not in
`model.parameters()`, so the optimizer never updates them, `.to(device)` does not move them,
`state_dict()` does not save them and DDP does not synchronise them. The probe finds them by
walking each registered module's attributes, watches them during the shapes pass with forward
hooks, shows them in the module table (`registered: false`, names such as `blocks[0].fc`) and
reports each container that holds any that ran, at the line that assigned the container.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

Location = tuple[str, int]
MAX_DEPTH = 3  # containers inside containers inside an attribute
MAX_ITEMS = 4096  # items looked at per container


@dataclass
class StrayModule:
    name: str
    """`blocks[0]`, `encoder.heads['q']`: the owner's name, the attribute, the keys."""
    module: Any
    owner: Any
    attribute: str


@dataclass
class CallRecord:
    calls: int = 0
    seconds: float = 0.0
    shapes: list[list[int]] | None = None
    starts: list[float] = field(default_factory=list)


def _items(value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for index, (key, item) in enumerate(value.items()):
            if index >= MAX_ITEMS:
                return
            yield f"[{key!r}]", item
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value[:MAX_ITEMS]):
            yield f"[{index}]", item
    elif isinstance(value, (set, frozenset)):
        for index, item in enumerate(list(value)[:MAX_ITEMS]):
            yield f"[{index}]", item


def find_stray_modules(model: Any, torch: Any) -> list[StrayModule]:
    """Modules reachable from the model's attributes that are not among its named_modules()."""
    module_cls = torch.nn.Module
    registered = {id(module) for module in model.modules()}
    internals = set(vars(module_cls()))  # the bookkeeping every module has: not the user's
    found: list[StrayModule] = []
    seen: set[int] = set()

    def visit(value: Any, path: str, owner: Any, attribute: str, depth: int) -> None:
        if isinstance(value, module_cls):
            if id(value) not in registered and id(value) not in seen:
                seen.add(id(value))
                found.append(StrayModule(path, value, owner, attribute))
            return
        if depth >= MAX_DEPTH:
            return
        for suffix, item in _items(value):
            visit(item, path + suffix, owner, attribute, depth + 1)

    for prefix, owner in model.named_modules():
        for attribute, value in vars(owner).items():
            if attribute in internals:
                continue
            visit(value, f"{prefix}.{attribute}" if prefix else attribute, owner, attribute, 0)
    return found


class StrayModules:
    """The stray modules of one model, watched while the shapes pass runs."""

    def __init__(self, model: Any, torch: Any) -> None:
        self.model = model
        self.strays = find_stray_modules(model, torch)
        self.records: dict[int, CallRecord] = {}

    def all_modules(self) -> Iterator[tuple[str, Any, StrayModule]]:
        """Each stray module and everything inside it, with its table name."""
        for stray in self.strays:
            for inner_name, inner in stray.module.named_modules():
                name = f"{stray.name}.{inner_name}" if inner_name else stray.name
                yield name, inner, stray

    @contextlib.contextmanager
    def watching(
        self, synchronize: Callable[[], None], shapes_of: Callable[[Any], Any]
    ) -> Iterator[None]:
        """Forward hooks on the stray modules; each forward of the model starts afresh, so the
        records are those of the last forward, like the shapes pass's own."""
        if not self.strays:
            yield
            return
        handles = [self.model.register_forward_pre_hook(lambda *_: self.records.clear())]

        def before(module: Any, _args: Any) -> None:
            synchronize()
            self.records.setdefault(id(module), CallRecord()).starts.append(time.perf_counter())

        def after(module: Any, _args: Any, output: Any) -> None:
            synchronize()
            record = self.records.setdefault(id(module), CallRecord())
            started = record.starts.pop() if record.starts else time.perf_counter()
            record.calls += 1
            record.seconds += time.perf_counter() - started
            record.shapes = shapes_of(output)

        for _, module, _ in self.all_modules():
            handles.append(module.register_forward_pre_hook(before))
            handles.append(module.register_forward_hook(after))
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    def rows(self, origin_of: Callable[[Any], Location | None]) -> list[dict[str, Any]]:
        """Module-table rows for every stray module, `registered: false`."""
        rows = []
        for name, module, _ in self.all_modules():
            record = self.records.get(id(module))
            params = list(module.parameters())
            where = origin_of(module)
            rows.append(
                {
                    "name": name,
                    "type": type(module).__name__,
                    "depth": name.count(".") + 1,
                    "output_shapes": record.shapes if record else None,
                    "calls": record.calls if record else 0,
                    "forward_ms": record.seconds * 1000 if record else None,
                    "params": sum(p.numel() for p in params),
                    "trainable_params": sum(p.numel() for p in params if p.requires_grad),
                    "flops": None,
                    "file": where[0] if where else None,
                    "line": where[1] if where else None,
                    "registered": False,
                }
            )
        return rows

    def findings(
        self,
        container_sites: dict[tuple[int, str], Location],
        origin_of: Callable[[Any], Location | None],
    ) -> list[dict[str, Any]]:
        """One finding per attribute whose stray modules ran in forward."""
        ran = [
            stray for stray in self.strays
            if any(self.records.get(id(inner), CallRecord()).calls
                   for inner in stray.module.modules())
        ]
        return [
            self._finding(
                strays, container_sites, origin_of,
                "they run in forward but are not submodules, so model.parameters() (the "
                "optimizer), .to(device), state_dict() and DDP miss them",
            )
            for strays in _by_attribute(ran).values()
        ]

    def left_behind(
        self,
        device: Any,
        container_sites: dict[tuple[int, str], Location],
        origin_of: Callable[[Any], Location | None],
    ) -> list[dict[str, Any]]:
        """One finding per attribute whose stray modules model.to(device) did not move, once
        the forward reached one of them (watching() saw it start): on a GPU the forward then
        fails mixing devices, and this is why."""
        reached = {
            (id(stray.owner), stray.attribute) for stray in self.strays
            if any(id(inner) in self.records for inner in stray.module.modules())
        }
        behind = [
            stray for stray in self.strays
            if (id(stray.owner), stray.attribute) in reached
            and any(tensor.device != device for tensor in _tensors(stray.module))
        ]
        findings = []
        for strays in _by_attribute(behind).values():
            still_on = sorted(
                {str(t.device) for s in strays for t in _tensors(s.module) if t.device != device}
            )
            findings.append(self._finding(
                strays, container_sites, origin_of,
                f"model.to({device}) did not move them: they are still on {', '.join(still_on)}",
            ))
        return findings

    @staticmethod
    def _finding(
        strays: list[StrayModule],
        container_sites: dict[tuple[int, str], Location],
        origin_of: Callable[[Any], Location | None],
        consequence: str,
    ) -> dict[str, Any]:
        key = (id(strays[0].owner), strays[0].attribute)
        where = container_sites.get(key) or origin_of(strays[0].module)
        attribute = strays[0].name.split("[")[0]
        params = sum(p.numel() for s in strays for p in s.module.parameters())
        holder = "a plain container" if key in container_sites else "a plain attribute"
        wrapper = "nn.ModuleDict" if "['" in strays[0].name else "nn.ModuleList"
        return {
            "kind": "unregistered_module",
            "severity": "warning",
            "message": f"{attribute} keeps {len(strays)} module(s) with {params:,} "
            f"parameters in {holder}: {consequence}. Wrap them in {wrapper}",
            "file": where[0] if where else None,
            "line": where[1] if where else None,
            "count": len(strays),
            "detail": ", ".join(s.name for s in strays),
        }


def _tensors(module: Any) -> Iterator[Any]:
    yield from module.parameters()
    yield from module.buffers()


def _by_attribute(strays: list[StrayModule]) -> dict[tuple[int, str], list[StrayModule]]:
    grouped: dict[tuple[int, str], list[StrayModule]] = {}
    for stray in strays:
        grouped.setdefault((id(stray.owner), stray.attribute), []).append(stray)
    return grouped
