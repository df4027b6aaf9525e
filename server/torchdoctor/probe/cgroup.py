"""A cgroup (v2) of its own for a runner, where the system lets this process make one.

A cgroup holds every process forked under the runner, whatever its session, group or parent,
and `cgroup.kill` ends them all at once (Linux 5.14+; older kernels: each listed process is
killed). It is the strongest way to contain a probe, but it needs a cgroup v2 hierarchy this
process may write to (a delegated systemd scope, a container run as root); elsewhere
`RunnerCgroup.create` returns None and `ProcessTree` alone does the work.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

PROC = Path("/proc")
KILL_ROUNDS = 200
PREFIX = "torchdoctor-probe-"


def _unified_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted, from /proc/self/mountinfo."""
    try:
        lines = (PROC / "self" / "mountinfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split()
        if right.split()[:1] == ["cgroup2"] and len(fields) > 4:
            return Path(fields[4])
    return None


def _own_cgroup() -> str | None:
    """This process's cgroup v2 path (the `0::` line of /proc/self/cgroup)."""
    try:
        lines = (PROC / "self" / "cgroup").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            return line[3:].strip()
    return None


def _remove_empty_leftovers(parent: Path) -> None:
    """A server killed before it removed its runners' cgroups leaves them, empty (its runners
    exit when it dies). rmdir removes only an empty cgroup: the ones in use stay."""
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            if entry.name.startswith(PREFIX):
                with contextlib.suppress(OSError):
                    entry.rmdir()


class RunnerCgroup:
    """One cgroup holding one runner and everything under it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, pid: int) -> RunnerCgroup | None:
        """Move `pid` into a new cgroup below this process's; None when that is not allowed."""
        mount, own = _unified_mount(), _own_cgroup()
        if mount is None or own is None:
            return None
        parent = mount / own.lstrip("/")
        _remove_empty_leftovers(parent)
        path = parent / f"{PREFIX}{pid}"
        try:
            path.mkdir()
        except OSError:
            return None
        cgroup = cls(path)
        try:
            (path / "cgroup.procs").write_text(f"{pid}\n")
        except OSError:
            cgroup.remove()
            return None
        return cgroup

    def pids(self) -> list[int]:
        try:
            text = (self.path / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(word) for word in text.split() if word.isdigit()]

    def holds(self, pid: int) -> bool:
        return pid in self.pids()

    def kill(self) -> None:
        """SIGKILL every process in the cgroup and remove it (bounded: it never waits long)."""
        killed_at_once = False
        with contextlib.suppress(OSError):
            (self.path / "cgroup.kill").write_text("1\n")
            killed_at_once = True
        for _ in range(KILL_ROUNDS):
            members = [pid for pid in self.pids() if pid != os.getpid()]
            if not members:
                break
            if not killed_at_once:
                for pid in members:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)
        self.remove()

    def remove(self) -> None:
        """The cgroup goes once it is empty (zombies still count until they are reaped)."""
        for _ in range(KILL_ROUNDS):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.005)
