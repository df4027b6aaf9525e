"""Shared helpers for the passes: tensors inside values, one forward and its loss under the
probe's precision plan, and the Session every pass receives.
"""

from __future__ import annotations

from typing import Any

from .companions import companion_module
from .events import Progress
from .inputs import ChosenInput
from .loading import OriginRecorder, definition_line
from .request import ProbeRequest
from .user_code import Location, UserCode, user_code_phase

# The precision every forward/backward of the running probe follows (set by apply_precision;
# each probe runs in a child of its own, so one probe's plan never reaches another's).
_precision: Any = companion_module("precision").PrecisionPlan(None, "model", None, False, "cpu")


def follow_precision(plan: Any) -> None:
    """Every later forward and backward of this probe follows `plan` (see apply_precision)."""
    global _precision
    _precision = plan


def iter_tensors(value: Any) -> list[Any]:
    """Every tensor inside an output: tuples, lists, dicts, dataclasses, namedtuples.
    A list, not a generator: the checker calls this for every torch call."""
    import torch

    found: list[Any] = []
    _collect_tensors(value, found, torch.Tensor)
    return found


def _collect_tensors(value: Any, found: list[Any], tensor_type: type) -> None:
    import dataclasses

    if isinstance(value, tensor_type):
        found.append(value)
    elif isinstance(value, (tuple, list)):
        for item in value:
            if isinstance(item, tensor_type):
                found.append(item)
            elif not isinstance(item, (int, float, str, bool, type(None))):
                _collect_tensors(item, found, tensor_type)
    elif isinstance(value, dict):
        for item in value.values():
            _collect_tensors(item, found, tensor_type)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for item in dataclasses.fields(value):
            _collect_tensors(getattr(value, item.name, None), found, tensor_type)


def shapes_of(value: Any) -> list[list[int]]:
    return [list(t.shape) for t in iter_tensors(value)]


def run_forward(model: Any, inputs: ChosenInput) -> Any:
    with _precision.forward_context():
        return model(*inputs.args, **inputs.kwargs)


def loss_of(output: Any) -> Any:
    """A scalar that backpropagates through every differentiable output."""
    total = None
    for tensor in iter_tensors(output):
        if tensor.requires_grad and (tensor.is_floating_point() or tensor.is_complex()):
            term = tensor.real.sum() if tensor.is_complex() else tensor.sum()
            total = term if total is None else total + term.to(total.dtype)
    return total if total is None else _precision.scale(total)


class Session:
    """Everything one probe needs while its passes run."""

    def __init__(
        self,
        request: ProbeRequest,
        model: Any,
        inputs: ChosenInput,
        device: Any,
        user: UserCode,
        origins: OriginRecorder,
        progress: Progress,
    ) -> None:
        self.request = request
        self.model = model
        self.inputs = inputs
        self.device = device
        self.user = user
        self.origins = origins
        self.progress = progress
        self.file = request.file
        self.is_cuda = device.type == "cuda"
        self.can_backward = True
        self.warnings: list[str] = []
        self.unused_parameters: list[str] = []
        self.modules_by_name = dict(model.named_modules())

    def synchronize(self) -> None:
        if self.is_cuda:
            import torch

            torch.cuda.synchronize(self.device)

    def forward(self) -> Any:
        with user_code_phase("forward", f"{type(self.model).__name__}.forward raised", self.user):
            return run_forward(self.model, self.inputs)

    def backward(self, output: Any) -> None:
        loss = loss_of(output)
        if loss is None:
            if self.can_backward:
                self.warnings.append("backward skipped: no output of forward requires grad")
            self.can_backward = False
            return
        with user_code_phase("backward", "backward through the model raised", self.user):
            loss.backward()

    def step(self) -> None:
        output = self.forward()
        if self.can_backward:
            self.backward(output)
        del output
        self.model.zero_grad(set_to_none=True)

    def module_origin(self, name: str) -> Location | None:
        """Where the submodule was created; for copies made inside a library (deepcopy in
        nn.TransformerEncoder) the nearest ancestor that was created in user code."""
        while True:
            module = self.modules_by_name.get(name)
            where = self.origins.modules.get(id(module)) if module is not None else None
            if where is not None:
                return where
            if not name:
                line = definition_line(type(self.model), self.file)
                return (self.file, line) if line else None
            name = name.rpartition(".")[0]

    def tensor_origin(self, name: str, tensor: Any) -> Location | None:
        """Where a parameter was registered, or where its owning module was created."""
        return (
            self.origins.params.get(id(tensor))
            or self.origins.sites.tensor_sites.get(id(tensor))
            or self.module_origin(name.rpartition(".")[0])
        )
