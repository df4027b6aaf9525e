"""torchrun (`torch.distributed.run`) inside a process that keeps the ranks contained.

Runs in the user's interpreter: `python rank_launcher.py <torchrun arguments>`. Before handing
over to torchrun it asks Linux for two things: to be killed when the process that started it
dies (so a server that is killed leaves no job behind; each rank in turn dies with this
process, see rank_worker.set_parent_death_signal), and to be a child subreaper (so whatever a
rank double-forks stays below this process, where the server's process-tree kill finds it).
torchrun starts every rank in a session of its own: a kill of this process group alone would
miss them.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def prctl(option: int, value: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def main() -> None:
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    sys.argv = ["torchrun", *sys.argv[1:]]
    runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
