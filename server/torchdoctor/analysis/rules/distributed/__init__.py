"""Rules of the distributed family (see DESIGN.md §3): data-parallel scripts whose ranks train on
the same data, start from different weights, or all write the same checkpoint."""

from . import (
    td601_ddp_find_unused,
    td602_fsdp_sync_module_states,
    td603_save_on_every_rank,
    td604_ddp_without_distributed_sampler,
)

__all__ = [
    "td601_ddp_find_unused",
    "td602_fsdp_sync_module_states",
    "td603_save_on_every_rank",
    "td604_ddp_without_distributed_sampler",
]
