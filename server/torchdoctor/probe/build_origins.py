"""Where the model's tensors and containers were made while it was built: the user's lines.

Loaded by runner/ from the file next to it; it imports only the standard library and torch.

While the constructor runs, three things are noted at the innermost user frame:

- `register_buffer(name, tensor)`: the buffer's line (a float64 buffer is reported there, not
  at the class line);
- `self.name = value`: the line of a plain tensor attribute, and of an attribute holding a
  list, tuple, set or dict (where unregistered submodules are stored);
- `torch.from_numpy(array)` of a float64 array: the line that made the tensor, which beats the
  line that later stores it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

Location = tuple[str, int]
CONTAINER_TYPES = (list, tuple, set, frozenset, dict)


@dataclass
class BuildOrigins:
    innermost_user_frame: Callable[[Any], Location | None]
    tensor_sites: dict[int, Location] = field(default_factory=dict)
    """id(tensor) -> the line that made (from_numpy) or stored (register_buffer, attribute)."""
    made_from_numpy: dict[int, Location] = field(default_factory=dict)
    container_sites: dict[tuple[int, str], Location] = field(default_factory=dict)
    """(id(module), attribute) -> the line that assigned a container to it."""
    _keep_alive: list[Any] = field(default_factory=list)

    def _note_tensor(self, tensor: Any, where: Location | None) -> None:
        if where is None or id(tensor) in self.tensor_sites:
            return
        self.tensor_sites[id(tensor)] = self.made_from_numpy.get(id(tensor), where)
        self._keep_alive.append(tensor)

    @contextlib.contextmanager
    def recording(self, torch: Any) -> Iterator[None]:
        module_cls = torch.nn.Module
        parameter_cls = torch.nn.Parameter
        original_register = module_cls.register_buffer
        original_setattr = module_cls.__setattr__
        original_from_numpy = torch.from_numpy
        origins = self

        def recording_register(module: Any, name: str, tensor: Any, *args: Any, **kw: Any) -> Any:
            result = original_register(module, name, tensor, *args, **kw)
            if tensor is not None:
                origins._note_tensor(tensor, origins.innermost_user_frame(sys._getframe(1)))
            return result

        def recording_setattr(module: Any, name: str, value: Any) -> None:
            original_setattr(module, name, value)
            if isinstance(value, torch.Tensor) and not isinstance(value, parameter_cls):
                origins._note_tensor(value, origins.innermost_user_frame(sys._getframe(1)))
            elif isinstance(value, CONTAINER_TYPES):
                where = origins.innermost_user_frame(sys._getframe(1))
                if where is not None:
                    origins.container_sites.setdefault((id(module), name), where)
                    origins._keep_alive.append(module)

        def recording_from_numpy(array: Any) -> Any:
            tensor = original_from_numpy(array)
            if tensor.dtype == torch.float64:
                where = origins.innermost_user_frame(sys._getframe(1))
                if where is not None:
                    origins.made_from_numpy[id(tensor)] = where
                    origins._keep_alive.append(tensor)
            return tensor

        module_cls.register_buffer = recording_register
        module_cls.__setattr__ = recording_setattr
        torch.from_numpy = recording_from_numpy
        try:
            yield
        finally:
            module_cls.register_buffer = original_register
            module_cls.__setattr__ = original_setattr
            torch.from_numpy = original_from_numpy

    def release(self) -> None:
        self._keep_alive.clear()


    def float64_attribute_findings(self, model: Any, torch: Any) -> list[dict[str, Any]]:
        """A float64 finding for each float64 tensor attribute, at the line that made it."""
        by_place: dict[Location | None, list[str]] = {}
        for name, tensor in plain_tensor_attributes(model, torch):
            if tensor.dtype in (torch.float64, torch.complex128):
                by_place.setdefault(self.tensor_sites.get(id(tensor)), []).append(name)
        findings = []
        for where, names in by_place.items():
            listed = ", ".join(names)
            findings.append(
                {
                    "kind": "float64",
                    "severity": "warning",
                    "message": f"{listed} is a float64 tensor attribute made here: twice the "
                    "memory of float32, much slower on GPUs, and float32 weights it meets "
                    "raise 'expected scalar type'. Convert it with .float() (and register it "
                    "with register_buffer so .to() moves it)",
                    "file": where[0] if where else None,
                    "line": where[1] if where else None,
                    "count": len(names),
                    "detail": listed,
                }
            )
        return findings


def plain_tensor_attributes(model: Any, torch: Any) -> Iterator[tuple[str, Any]]:
    """(qualified name, tensor) of tensors held as plain attributes of the model's modules:
    not parameters, not buffers, so `.to()` and `state_dict()` do not see them."""
    for prefix, module in model.named_modules():
        for name, value in vars(module).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                yield (f"{prefix}.{name}" if prefix else name), value
