"""The torch classes that wrap a model for data-parallel training (DDP, FSDP), by qualified name."""

from __future__ import annotations

DDP_CLASSES = (
    "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel",
)
FSDP_CLASSES = (
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
)
