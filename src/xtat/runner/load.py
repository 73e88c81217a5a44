"""The machine's load while xtat measures: load average and the CPU time of other processes.

A speedup measured while something else used the cores may be the load's doing (a build
that uses fewer threads wins only while other work competes for the rest), so every
search and confirmation records what else ran. Linux only (/proc); elsewhere the load is
unknown and recorded as such.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class MachineLoad:
    wall_s: float
    other_cores: float | None  # mean cores used by processes other than xtat's (None: unknown)
    load_average: float | None  # the largest 1-minute load average seen
    cores: int
    # Mean cores the hypervisor gave other machines (steal): told, not gated on: on a shared VM it
    # rises with xtat's own work, and it slows a many-threaded build more than a one-threaded one.
    stolen_cores: float | None = None

    def to_json(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        if self.other_cores is None:
            return "machine load unknown (no /proc)"
        stolen = (f"; the hypervisor took {self.stolen_cores:.2f} cores (steal)"
                  if self.stolen_cores is not None and self.stolen_cores >= 0.05 else "")
        return (f"other processes used {self.other_cores:.2f} of {self.cores} cores on average, "
                f"load average up to {self.load_average:.2f}{stolen}")


def machine_cpu_s() -> tuple[float, float] | None:
    """(busy, stolen) CPU seconds of this machine since boot (/proc/stat, every CPU); see `cpu_ticks`."""
    try:
        busy, steal = cpu_ticks(Path("/proc/stat").read_text().split("\n", 1)[0])
    except OSError:
        return None
    return busy / _TICKS, steal / _TICKS


def cpu_ticks(cpu_line: str) -> tuple[int, int]:
    """(busy, steal) ticks in /proc/stat's `cpu` line. Busy: user, nice, system, irq and softirq;
    not idle or iowait; not guest, already counted in user and nice. Steal apart: the time a
    hypervisor ran other machines on these cores. On a shared VM it rises whenever xtat is busy;
    counted as another process's, it made idle machines' confirmations load-dependent (issue 30)."""
    values = [int(v) for v in cpu_line.split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (values + [0] * 8)[:8]
    return user + nice + system + irq + softirq, steal


def _stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (field 3, state, first), or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _process_s(pid: int) -> float | None:
    """CPU seconds of one process (all its threads), or None once it is gone."""
    fields = _stat(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


def _tree_s(root: int) -> tuple[float, set[int]]:
    """CPU seconds of `root` and every process below it, those already exited included, and their pids.

    Each process counts its own time and that of the children it has reaped (cutime, cstime):
    when a process is reaped its total moves into its parent's, so the sum over the tree only
    grows, and a worker or confirmation process that exited between two looks is still counted."""
    children: dict[int, list[int]] = {}
    totals: dict[int, float] = {}
    try:
        entries = [entry.name for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    except OSError:  # no /proc: the load is unknown (see `report`)
        entries = []
    for name in entries:
        fields = _stat(name)
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(name))
            totals[int(name)] = sum(int(f) for f in fields[11:15]) / _TICKS  # utime, stime, cutime, cstime
    tree, queue = set(), [root] if root in totals else []
    while queue:
        pid = queue.pop()
        tree.add(pid)
        queue += children.get(pid, [])
    return sum(totals[pid] for pid in tree), tree


class LoadMonitor:
    """Measures the load between start and `report`. xtat's own CPU time is that of the process
    tree under `root` (the tuner: its workers, confirmation processes and their children, those
    that exited during the window too), plus any other process `own_pids` names (a process not
    started from here). Call `poll` now and then: it catches the CPU time of such other own
    processes before they exit, and the load average's peaks."""

    def __init__(self, own_pids: Callable[[], list[int]], root: int | None = None):
        self._own_pids = own_pids
        self._root = os.getpid() if root is None else root
        self._start = time.monotonic()
        self._cpu = machine_cpu_s()
        self._own_start: dict[int, float] = {}
        self._own_last: dict[int, float] = {}
        self._load = 0.0
        self.poll(first=True)
        self._tree_start = self._tree_last

    def poll(self, first: bool = False) -> None:
        self._tree_last, tree = _tree_s(self._root)
        for pid in set(self._own_pids()) - tree:
            seconds = _process_s(pid)
            if seconds is None:
                continue
            # A process started during the window counts from zero.
            self._own_start.setdefault(pid, seconds if first else 0.0)
            self._own_last[pid] = seconds
        try:
            self._load = max(self._load, os.getloadavg()[0])
        except OSError:
            pass

    def report(self) -> MachineLoad:
        self.poll()
        wall = max(time.monotonic() - self._start, 1e-9)
        cpu = machine_cpu_s()
        cores = os.cpu_count() or 1
        if cpu is None or self._cpu is None:
            return MachineLoad(wall, None, None, cores)
        own = self._tree_last - self._tree_start + sum(self._own_last[pid] - self._own_start[pid]
                                                       for pid in self._own_last)
        other = max(0.0, cpu[0] - self._cpu[0] - own)
        return MachineLoad(wall, other / wall, self._load, cores, (cpu[1] - self._cpu[1]) / wall)
