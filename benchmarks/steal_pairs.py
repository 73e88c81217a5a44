"""How the hypervisor's steal moves a runtime setup's figure on a shared VM.

Two processes hold the target's default build, jitted: one with every CPU, one pinned to the
first CPU (`--sides` names others). They are sampled in alternating pairs for `--seconds`, each
sample a calibrated batch of calls (`runner.timing.calibrate`), with /proc/stat's steal read
around each pair. Per `--window` seconds it prints the steal, the median ratio (the first side's
time over the second's) over every pair, and over the pairs the host stole less than
`STEAL_SHARE` of the cores' time from (`stole`: one tick, 10 ms, is 12% of a 40 ms pair on 2
cores). At the end: the spread of both kinds of window medians. `--sides 0 1` pins both to one
CPU each: how much steal moves a one-threaded build.

The tuner retook such pairs at 4d9ba16 and f2761ae. Setup finalists' search figures came a little
nearer their side-by-side ones, but most still missed, and it cost trials and confirmations, so
it was reverted (docs/search.md). This shows why it was tried and what it could not remove.

    .venv/bin/python benchmarks/steal_pairs.py TARGET [--seconds 150] [--window 10] [--sides all 0] [--json OUT.json]

Linux only (/proc/stat). Run it on an otherwise idle machine: the steal it sees is the host's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

STEAL_SHARE = 0.05


def stolen_s() -> float | None:
    """CPU seconds of steal on every CPU since boot, as the load gate reads them, or None where unknown."""
    from xtat.runner.load import machine_cpu_s

    read = machine_cpu_s()
    return None if read is None else read[1]


def stole(steal_s: float, wall_s: float) -> bool:
    """Whether `steal_s` over `wall_s` is STEAL_SHARE or more of this machine's cores' time."""
    return steal_s >= STEAL_SHARE * max(wall_s, 1e-9) * (os.cpu_count() or 1)


def child(side: str, target: str) -> None:
    """One side: pinned as `side` says ("all": not pinned), the target jitted; one batch per input line."""
    if side != "all":
        os.sched_setaffinity(0, [int(cpu) for cpu in side.split(",")])
    import jax

    from xtat.capture.targets import load_target
    from xtat.runner.timing import TimingPolicy, calibrate, sample

    workload = load_target(target)
    step = jax.jit(workload.fn, static_argnums=workload.static_argnums, static_argnames=workload.static_argnames)
    kwargs = workload.kwargs or {}

    def call() -> None:
        jax.block_until_ready(step(*workload.args, **kwargs))

    for _ in range(5):
        call()
    inner = calibrate(call, TimingPolicy())
    print("ready", flush=True)
    for _ in sys.stdin:
        print(sample(call, inner), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target")
    parser.add_argument("--seconds", type=float, default=150.0)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--sides", nargs=2, default=["all", "0"], metavar=("FIRST", "SECOND"),
                        help='each "all" or a comma list of CPUs to pin to (default: all 0)')
    parser.add_argument("--json", default=None)
    options = parser.parse_args()
    if stolen_s() is None:
        raise SystemExit("no /proc/stat here: steal cannot be read")
    sides = [subprocess.Popen([sys.executable, __file__, "--child", side, options.target], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for side in options.sides]
    try:
        for process in sides:
            if process.stdout is None or process.stdout.readline().strip() != "ready":
                raise SystemExit("a side did not start: see its error above")

        def sample(process: subprocess.Popen) -> float:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write("go\n")
            process.stdin.flush()
            return float(process.stdout.readline())

        pairs: list[dict[str, float]] = []
        started = time.monotonic()
        while time.monotonic() - started < options.seconds:
            order = sides if len(pairs) % 2 == 0 else sides[::-1]  # alternating, as `paired` does
            before, began = stolen_s() or 0.0, time.monotonic()
            seconds = {id(process): sample(process) for process in order}
            pairs.append({"at_s": began - started, "ratio": seconds[id(sides[0])] / seconds[id(sides[1])],
                          "steal_s": (stolen_s() or 0.0) - before, "wall_s": time.monotonic() - began})
    finally:
        for process in sides:
            process.kill()
    windows = []
    for start in range(0, int(options.seconds // options.window)):
        inside = [pair for pair in pairs if start * options.window <= pair["at_s"] < (start + 1) * options.window]
        kept = [pair["ratio"] for pair in inside if not stole(pair["steal_s"], pair["wall_s"])]
        if not inside or not kept:
            continue
        windows.append({"from_s": start * options.window, "steal_s": sum(pair["steal_s"] for pair in inside),
                        "pairs": len(inside), "median": statistics.median(pair["ratio"] for pair in inside),
                        "kept": len(kept), "median_kept": statistics.median(kept)})
        row = windows[-1]
        print(f"{row['from_s']:5.0f} s  steal {row['steal_s']:5.2f} s  every pair {row['median']:.3f}x "
              f"({row['pairs']})  kept {row['median_kept']:.3f}x ({row['kept']})", flush=True)
    every = [row["median"] for row in windows]
    kept = [row["median_kept"] for row in windows]
    print(f"{options.target}, {options.sides[0]} over {options.sides[1]}: window medians over every pair "
          f"{min(every):.3f}-{max(every):.3f}x, over the pairs kept {min(kept):.3f}-{max(kept):.3f}x; "
          f"the host stole from {sum(stole(p['steal_s'], p['wall_s']) for p in pairs)} of {len(pairs)} pairs")
    if options.json:
        Path(options.json).write_text(json.dumps({"target": options.target, "sides": options.sides,
                                                  "windows": windows, "pairs": pairs}, indent=1))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        main()
