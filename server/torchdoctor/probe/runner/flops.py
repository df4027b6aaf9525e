"""Pass: FLOPs (FlopCounterMode, forward and forward+backward in one run)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .session import Session

Shape = tuple[int, ...]

# FlopCounterMode's own formulas leave two holes in attention, both filled below with torch's
# counts for the kernels it does know:
# - the CPU kernel of scaled_dot_product_attention (`..._flash_attention_for_cpu` and its
#   backward) has no formula, so attention counted 0 FLOPs on the CPU;
# - before torch 2.13 the formulas refused grouped-query attention (key/value with fewer
#   heads than the query), and the whole FLOP pass raised on a GPU.
# Key/value heads are broadcast to the query's, as the kernels do and as torch 2.13 counts.
FORWARD_KERNELS = (
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
)
BACKWARD_KERNELS = tuple(f"{name}_backward" for name in FORWARD_KERNELS)


def broadcast_heads(query: Shape, other: Shape) -> Shape:
    """`other` (a key, value or gradient shape) with the query's head count when grouped."""
    if len(query) == 4 and len(other) == 4 and other[1] and query[1] % other[1] == 0:
        return (other[0], query[1], other[2], other[3])
    return other


def attention_formulas() -> dict[Any, Callable[..., int]]:
    """Formulas for FlopCounterMode(custom_mapping=...): every attention kernel this torch
    has, forward and backward."""
    import torch
    from torch.utils import flop_counter

    def forward(query: Shape, key: Shape, value: Shape, *_: Any, **__: Any) -> int:
        count = flop_counter.sdpa_flop_count
        return int(count(  # type: ignore[no-untyped-call]  # torch's formula, unannotated
            query, broadcast_heads(query, key), broadcast_heads(query, value)
        ))

    def backward(grad_out: Shape, query: Shape, key: Shape, value: Shape, *_: Any,
                 **__: Any) -> int:
        count = flop_counter.sdpa_backward_flop_count
        return int(count(  # type: ignore[no-untyped-call]  # torch's formula, unannotated
            grad_out, query, broadcast_heads(query, key), broadcast_heads(query, value)
        ))

    aten = torch.ops.aten
    formulas: dict[Any, Callable[..., int]] = {}
    for names, formula in ((FORWARD_KERNELS, forward), (BACKWARD_KERNELS, backward)):
        for name in names:
            if hasattr(aten, name):
                formulas[getattr(aten, name)] = formula
    return formulas


def flops_pass(session: Session) -> tuple[int, int | None, dict[str, int]]:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False, custom_mapping=attention_formulas())
    with counter:
        output = session.forward()
        forward_total = counter.get_total_flops()
        per_module = {
            name: sum(per_op.values()) for name, per_op in counter.get_flop_counts().items()
        }
        session.progress.stage("flops", "counted forward FLOPs", 0.5)
        total: int | None = None
        if session.can_backward:
            session.backward(output)
            total = counter.get_total_flops()
    del output
    session.model.zero_grad(set_to_none=True)
    return forward_total, total, per_module


def module_flops_by_name(per_module: dict[str, int], root_type: str) -> dict[str, int]:
    """FlopCounterMode names modules `<RootClass>.child.grandchild`; rows use `child...`."""
    by_name = {}
    for key, flops in per_module.items():
        if key == "Global":
            continue
        if key == root_type:
            by_name[""] = flops
        elif key.startswith(root_type + "."):
            by_name[key[len(root_type) + 1 :]] = flops
    return by_name
