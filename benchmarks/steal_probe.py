"""What the load gate counts on this machine while xtat's own processes are busy.

Runs three short jax processes one after another (as a confirmation does) under a
`LoadMonitor`, and prints the `cpu` fields of /proc/stat that changed over the window beside
the monitor's `other_cores`. On a shared VM, `steal` rises with our own work; the gate does not
count it, and tells it apart (runner/load.py: cpu_ticks). Run it on an otherwise idle machine:

    .venv/bin/python benchmarks/steal_probe.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from xtat.runner.load import LoadMonitor

FIELDS = "user nice system idle iowait irq softirq steal guest guest_nice".split()
BUSY = ("import time, jax, jax.numpy as jnp\nf = jax.jit(lambda x: jnp.tanh(x @ x).sum())\nx = jnp.ones((256, 256))\n"
        "end = time.time() + 4\nwhile time.time() < end: f(x).block_until_ready()")


def cpu_fields() -> list[int]:
    return [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]


def main() -> None:
    before, monitor = cpu_fields(), LoadMonitor(lambda: [])
    for _ in range(3):
        subprocess.run([sys.executable, "-c", BUSY], check=True)
        monitor.poll()
    after, load = cpu_fields(), monitor.report()
    changed = {name: b - a for name, a, b in zip(FIELDS, before, after, strict=False) if b != a}
    print(f"/proc/stat ticks over {load.wall_s:.1f} s: {changed}")
    print(f"load gate: {load.describe()}")


if __name__ == "__main__":
    main()
