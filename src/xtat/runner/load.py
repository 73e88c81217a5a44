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
class Load:
    wall_s: float
    other_cores: float | None  # mean cores used by processes other than xtat's (None: unknown)
    load_average: float | None  # the largest 1-minute load average seen
    cores: int

    def to_json(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        if self.other_cores is None:
            return "machine load unknown (no /proc)"
        return (f"other processes used {self.other_cores:.2f} of {self.cores} cores on average, "
                f"load average up to {self.load_average:.2f}")


def _busy_s() -> float | None:
    """CPU seconds all processes have been busy since boot (/proc/stat, every CPU)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    values = [int(v) for v in fields]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    guest = sum(values[8:10]) if len(values) > 9 else 0  # already counted in user and nice
    return (sum(values) - idle - guest) / _TICKS


def _process_s(pid: int) -> float | None:
    """CPU seconds of one process (all its threads), or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


class LoadMonitor:
    """Measures the load between start and `report`; `own_pids` names xtat's processes
    (the tuner itself is always counted as own). Call `poll` now and then: it catches the
    CPU time of own processes before they exit, and the load average's peaks."""

    def __init__(self, own_pids: Callable[[], list[int]]):
        self._own_pids = own_pids
        self._start = time.monotonic()
        self._busy = _busy_s()
        self._own_start: dict[int, float] = {}
        self._own_last: dict[int, float] = {}
        self._load = 0.0
        self.poll(first=True)

    def poll(self, first: bool = False) -> None:
        for pid in {os.getpid(), *self._own_pids()}:
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

    def report(self) -> Load:
        self.poll()
        wall = max(time.monotonic() - self._start, 1e-9)
        busy = _busy_s()
        cores = os.cpu_count() or 1
        if busy is None or self._busy is None:
            return Load(wall, None, None, cores)
        own = sum(self._own_last[pid] - self._own_start[pid] for pid in self._own_last)
        other = max(0.0, busy - self._busy - own)
        return Load(wall, other / wall, self._load, cores)
