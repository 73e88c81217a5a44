"""The processes a test started, found by what they inherited (psutil reads /proc for us)."""

from __future__ import annotations

import time

import psutil


def marked(marker: str, command: str = "") -> set[int]:
    """Live processes (zombies left out) whose environment holds `marker` ("NAME=VALUE") and whose
    command line holds `command`."""
    pids = set()
    for process in psutil.process_iter():
        try:
            if (process.status() != psutil.STATUS_ZOMBIE and command in " ".join(process.cmdline())
                    and marker in (f"{k}={v}" for k, v in process.environ().items())):
                pids.add(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return pids


def environment_of(pid: int) -> dict[str, str]:
    """The environment a started process runs with. Popen returns once the child's exec has begun,
    but the kernel fills in its environment a moment later, while it loads the new program: read
    too soon, on a busy machine, it is empty. So wait until it is not."""
    deadline = time.monotonic() + 30
    while not (environ := psutil.Process(pid).environ()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return environ
