"""Rules of the data family (see DESIGN.md §3): DataLoader arguments that cannot go together,
samplers whose order never changes, and worker processes that are missing or started unsafely."""

from . import (
    td501_shuffle_with_sampler,
    td502_sampler_set_epoch,
    td503_workers_options_without_workers,
    td504_single_process_loading,
    td505_workers_without_main_guard,
    td506_batch_sampler_conflict,
)

__all__ = [
    "td501_shuffle_with_sampler",
    "td502_sampler_set_epoch",
    "td503_workers_options_without_workers",
    "td504_single_process_loading",
    "td505_workers_without_main_guard",
    "td506_batch_sampler_conflict",
]
