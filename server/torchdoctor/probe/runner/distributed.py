"""Recommendation: DDP or FSDP, from the memory one replica needs."""

from __future__ import annotations

from typing import Any, cast

from .companions import companion_module

# Adam in mixed precision: fp32 master weights (4) + fp32 grads (4) + two fp32 moments (8);
# the bf16 working copy is usually counted with activations (the usual ZeRO accounting).
STATE_BYTES_PER_PARAM = 16


def distributed_recommendation(
    params: dict[str, Any],
    frozen_bytes: int,
    activation_bytes: int,
    device_memory: int | None,
    unused: list[str],
) -> dict[str, Any]:
    # Frozen parameters and buffers are only stored, not trained: their own bytes.
    states = STATE_BYTES_PER_PARAM * params["trainable"] + frozen_bytes + params["buffer_bytes"]
    total = states + activation_bytes
    state_fraction = states / device_memory if device_memory else None
    total_fraction = total / device_memory if device_memory else None
    if device_memory is None:
        strategy = "ddp"
        reason = (
            f"no GPU in this probe: {fmt_bytes(total)} per replica "
            f"({fmt_bytes(states)} model states + {fmt_bytes(activation_bytes)} activations). "
            "On a GPU: DDP while the states stay under 40% and the total under 80% of its "
            "memory; above that shard with FSDP"
        )
    elif total_fraction is not None and total_fraction > 0.8:
        strategy = "fsdp_full_shard"
        reason = (
            f"states + activations need {fmt_bytes(total)} = {fmt_share(total_fraction)} of the "
            f"device's {fmt_bytes(device_memory)}: shard parameters, gradients and optimizer "
            "state (FSDP FULL_SHARD / fully_shard)"
        )
    elif state_fraction is not None and state_fraction > 0.4:
        strategy = "fsdp_shard_grad_op"
        reason = (
            f"model states alone take {fmt_bytes(states)} = {fmt_share(state_fraction)} of the "
            f"device: shard gradients and optimizer state (FSDP SHARD_GRAD_OP, ZeRO-2)"
        )
    else:
        strategy = "ddp"
        fraction = cast(float, total_fraction)  # not None: a GPU's memory is never 0
        reason = (
            f"{fmt_bytes(total)} per replica = {fmt_share(fraction)} of the device's "
            f"{fmt_bytes(device_memory)}: a full replica per GPU fits, DDP is simplest and "
            "fastest"
        )
    if unused:
        reason += (
            f"; {len(unused)} parameter(s) get no gradient: DDP needs "
            "find_unused_parameters=True (or remove them)"
        )
    return {
        "strategy": strategy,
        "reason": reason,
        "bytes_per_trainable_param": STATE_BYTES_PER_PARAM,
        "model_state_bytes": states,
        "activation_bytes": activation_bytes,
        "total_bytes": total,
        "device_memory_bytes": device_memory,
        "state_fraction": state_fraction,
        "total_fraction": total_fraction,
        "find_unused_parameters": bool(unused),
        "unused_parameters": unused,
    }


def fmt_bytes(value: float) -> str:
    """Bytes as the CLI and the editor print them (units.py, loaded by path from probe/)."""
    return str(companion_module("units").size(value))


def fmt_share(fraction: float) -> str:
    """A share as the CLI and the editor print it (units.py)."""
    return str(companion_module("units").percent(fraction))
