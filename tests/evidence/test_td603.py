"""TD603: every process of a distributed job runs the whole script, torch.save included; a
rank-0 guard makes one process write. The guard checks is_initialized() first because
get_rank() raises when no process group exists."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

NEEDS_FORK = pytest.mark.skipif(
    not dist.is_available() or "fork" not in multiprocessing.get_all_start_methods(),
    reason="needs torch.distributed and the fork start method",
)


TWO_RANKS = """
import sys
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, folder):
    dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=rank, world_size=2)
    try:
        state = {"written_by": rank}
        for turn in range(2):  # rank 0 first, then rank 1: a deterministic last writer
            if turn == rank:
                torch.save(state, f"{folder}/unguarded.pt")
                if not dist.is_initialized() or dist.get_rank() == 0:
                    torch.save(state, f"{folder}/guarded.pt")
            dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    mp.start_processes(rank_main, args=(sys.argv[1],), nprocs=2, start_method="fork")
"""


@NEEDS_FORK
def test_every_rank_writes_and_the_last_one_wins(tmp_path: Path) -> None:
    script = tmp_path / "two_ranks.py"
    script.write_text(TWO_RANKS)
    result = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True,
                            text=True, timeout=100)
    assert result.returncode == 0, result.stderr
    assert torch.load(tmp_path / "unguarded.pt")["written_by"] == 1  # rank 1 overwrote rank 0
    assert torch.load(tmp_path / "guarded.pt")["written_by"] == 0  # only rank 0 wrote


def test_get_rank_without_a_process_group_raises() -> None:
    assert not dist.is_initialized()
    with pytest.raises(ValueError) as raised:
        dist.get_rank()
    assert str(raised.value) == (
        "Default process group has not been initialized, please make sure to call "
        "init_process_group."
    )
    assert not dist.is_initialized() or dist.get_rank() == 0  # the guard is safe here
