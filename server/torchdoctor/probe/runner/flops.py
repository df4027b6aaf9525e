"""Pass: FLOPs (FlopCounterMode, forward and forward+backward in one run)."""

from __future__ import annotations

from .session import Session


def flops_pass(session: Session) -> tuple[int, int | None, dict[str, int]]:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
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
