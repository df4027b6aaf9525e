"""TD602: FSDP shards the weights each rank holds; it broadcasts nothing unless
sync_module_states=True, which needs the module on the GPU."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

NEEDS_FORK = pytest.mark.skipif(
    not dist.is_available() or "fork" not in multiprocessing.get_all_start_methods(),
    reason="needs torch.distributed and the fork start method",
)


TWO_RANKS = """
import json, sys
from pathlib import Path
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


def rank_main(rank, folder):
    dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=rank, world_size=2)
    try:
        torch.manual_seed(rank)  # the ranks initialise differently
        module = nn.Linear(4, 4)
        own = module.weight.detach().flatten().tolist()
        model = FSDP(module, device_id=torch.device("cpu"), use_orig_params=True)
        with FSDP.summon_full_params(model):
            full = model.weight.detach().flatten().tolist()
        Path(f"{folder}/rank{rank}.json").write_text(json.dumps({"own": own, "full": full}))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    mp.start_processes(rank_main, args=(sys.argv[1],), nprocs=2, start_method="fork")
"""


@NEEDS_FORK
def test_without_sync_each_rank_contributes_its_own_shard(tmp_path: Path) -> None:
    script = tmp_path / "two_ranks.py"
    script.write_text(TWO_RANKS)
    result = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True,
                            text=True, timeout=100)
    assert result.returncode == 0, result.stderr
    rank0, rank1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert rank0["full"] == rank1["full"]  # one sharded model ...
    assert rank0["own"] != rank1["own"]
    # ... whose flat parameter (16 weights + 4 biases, 10 per rank) comes from both ranks:
    # the first 10 weights from rank 0's initialisation, the other 6 from rank 1's
    assert rank0["full"][:10] == rank0["own"][:10]
    assert rank0["full"][10:] == rank1["own"][10:]
    assert rank0["full"] != rank0["own"]


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
def test_sync_module_states_refuses_cpu_modules(tmp_path: Path) -> None:
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "switching to use NO_SHARD"
            with pytest.raises(ValueError) as raised:
                FSDP(nn.Linear(4, 4), device_id=torch.device("cpu"), sync_module_states=True)
    finally:
        dist.destroy_process_group()
    assert str(raised.value) == (
        "The module has CPU parameters or buffers when `sync_module_states=True`, which "
        "requires them to be on GPU. Please specify the `device_id` argument or move the "
        "module to GPU before passing it to FSDP."
    )
