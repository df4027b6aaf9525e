"""Find and kill a runner and everything it started, wherever those processes moved.

A process the user's model starts may leave the runner's process group (`start_new_session`)
or double-fork so that its parent exits: a kill of the group misses it, and it keeps the
runner's pipes open. `ProcessTree` follows parent links in /proc instead: the runner makes
itself a child subreaper, so orphans stay below it while it lives, and the processes seen
below it are recorded while a probe runs, so that they are still killed when the runner died
first and they went to init. A recorded process is identified by its pid and start time, so a
later process that reuses the pid is never killed.

Without /proc (macOS) only the process group can be killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
KILL_ROUNDS = 400


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    parent: int
    group: int
    state: str
    started: str  # start time in clock ticks since boot: tells apart processes of one pid

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")


def read_process(pid: int) -> ProcessInfo | None:
    try:
        stat = (PROC / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return _parse_stat(pid, stat)


def _parse_stat(pid: int, stat: str) -> ProcessInfo | None:
    # Fields after the command name, which may itself hold spaces and parentheses.
    fields = stat.rsplit(")", 1)[-1].split()
    if len(fields) < 20 or not fields[1].isdigit() or not fields[2].lstrip("-").isdigit():
        return None
    return ProcessInfo(pid, int(fields[1]), int(fields[2]), fields[0], fields[19])


def process_table() -> dict[int, ProcessInfo]:
    """Every process /proc shows, by pid (empty without /proc)."""
    table: dict[int, ProcessInfo] = {}
    try:
        entries = os.listdir(PROC)
    except OSError:
        return table
    for entry in entries:
        if entry.isdigit():
            info = read_process(int(entry))
            if info is not None:
                table[info.pid] = info
    return table


def descendants(root: int, table: dict[int, ProcessInfo]) -> list[ProcessInfo]:
    """The processes below `root` in `table`, zombies included."""
    children: dict[int, list[ProcessInfo]] = {}
    for info in table.values():
        children.setdefault(info.parent, []).append(info)
    found: list[ProcessInfo] = []
    queue = list(children.get(root, []))
    while queue:
        info = queue.pop()
        found.append(info)
        queue.extend(children.get(info.pid, []))
    return found


def group_alive(group: int) -> bool:
    """True while any non-zombie process is left in process group `group`."""
    if PROC.is_dir():
        return any(info.group == group and info.alive for info in process_table().values())
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ProcessTree:
    """A runner (which leads its own process group) and every process started under it."""

    def __init__(self, root: int) -> None:
        self.root = root
        self._seen: dict[int, str] = {}  # pid → start time, of processes once seen below root
        info = read_process(root)
        self._root_started = info.started if info is not None else None

    def _root_is_ours(self, table: dict[int, ProcessInfo]) -> bool:
        """False once the runner's pid belongs to another process (or to none)."""
        info = table.get(self.root)
        return info is not None and info.started == self._root_started

    def record(self) -> int:
        """Note the processes below the runner now; returns how many are known in all."""
        table = process_table()
        if self._root_is_ours(table):
            for info in descendants(self.root, table):
                self._seen[info.pid] = info.started
        return len(self._seen)

    def members(self) -> list[int]:
        """Live processes of the tree other than the runner: below it, in its group, or
        recorded earlier and still the same process."""
        table = process_table()
        found: set[int] = set()
        if self._root_is_ours(table):
            found |= {info.pid for info in descendants(self.root, table) if info.alive}
        found |= {  # a process group outlives its leader; its id is not reused while it does
            info.pid
            for info in table.values()
            if info.group == self.root and info.alive and info.pid != self.root
        }
        for pid, started in self._seen.items():
            info = table.get(pid)
            if info is not None and info.started == started and info.alive:
                found.add(pid)
        found.discard(self.root)
        found.discard(os.getpid())
        return sorted(found)

    def kill(self) -> int:
        """SIGKILL the tree: the processes below the runner first, while it still adopts
        their orphans, then the runner's group. Returns how many kills were sent. Bounded:
        it never waits on any of them."""
        sent = 0
        if PROC.is_dir():
            for _ in range(KILL_ROUNDS):
                members = self.members()
                if not members:
                    break
                for pid in members:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                        sent += 1
                time.sleep(0.002)
        with contextlib.suppress(OSError):
            os.killpg(self.root, signal.SIGKILL)
            sent += 1
        if PROC.is_dir():  # what the runner adopted after the first sweep
            for pid in self.members():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    sent += 1
        return sent
