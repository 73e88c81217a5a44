"""Does a CPU count entered after start-up hold, and what does it cost or save?

`xtat run` enters a runtime setup before the script starts: a process pinned to one CPU imports,
initialises and compiles on that CPU too, which made a sampling script slower end to end although
its decoding loop got faster (issue 31). The alternative is to move the process to one CPU once
its compiles are done. XLA's CPU client sizes its thread pools when it starts, so the question is
whether its threads follow an affinity set later. Three ways, each a fresh process, in a new
random order each round:

- `all`: every CPU throughout (XLA's default here);
- `start`: the first CPU from the start, as `xtat run` enters `cpus=1`;
- `late`: every CPU at start; after the compile and a warm-up, every thread of the process (the
  ones XLA started included, listed in /proc/self/task) moved to the first CPU.

Each process reports its compile seconds, its steady-state time per call (the median of samples
of at least 20 ms), and its thread count before and after. Per way: the medians over the rounds,
and each way's per-call ratio to `all` (median of the rounds' ratios, exact 95% interval).

    .venv/bin/python benchmarks/affinity_after_startup.py examples/kv_cache_decoder.py:make --rounds 6

Run it on an otherwise idle machine with at least two CPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

WAYS = ("all", "start", "late")


def child(way: str, target: str) -> None:
    import jax

    from xtat.capture.targets import load_target

    workload = load_target(target)
    jitted = jax.jit(workload.fn)
    started = time.perf_counter()
    compiled = jitted.lower(*workload.args, **(workload.kwargs or {})).compile()
    compile_s = time.perf_counter() - started
    for _ in range(5):
        jax.block_until_ready(compiled(*workload.args, **(workload.kwargs or {})))
    threads_before = len(os.listdir("/proc/self/task"))
    first = min(os.sched_getaffinity(0))
    if way == "late":
        for task in os.listdir("/proc/self/task"):
            os.sched_setaffinity(int(task), {first})
    # Calls per sample: enough for 20 ms.
    once = time.perf_counter()
    jax.block_until_ready(compiled(*workload.args, **(workload.kwargs or {})))
    calls = max(1, int(0.02 / max(time.perf_counter() - once, 1e-6)))
    samples = []
    for _ in range(30):
        started = time.perf_counter()
        for _ in range(calls):
            out = compiled(*workload.args, **(workload.kwargs or {}))
        jax.block_until_ready(out)
        samples.append((time.perf_counter() - started) / calls)
    print(json.dumps({"compile_s": compile_s, "per_call_s": statistics.median(samples),
                      "threads": [threads_before, len(os.listdir("/proc/self/task"))],
                      "cpus": sorted(os.sched_getaffinity(0))}))


def launch(way: str, target: str) -> dict:
    first = min(os.sched_getaffinity(0))
    setup = (lambda: os.sched_setaffinity(0, {first})) if way == "start" else None
    started = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--child", way, target], capture_output=True, text=True,
                          preexec_fn=setup, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{way}: {done.stderr[-2000:]}")
    row = json.loads(done.stdout.strip().splitlines()[-1])
    row["wall_s"] = time.perf_counter() - started
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--child", choices=WAYS)
    options = parser.parse_args()
    if options.child:
        child(options.child, options.target)
        return
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("needs at least two CPUs")
    from xtat.runner.timing import speedup_ci

    rng = random.Random(0)
    rows: dict[str, list[dict]] = {way: [] for way in WAYS}
    for _ in range(options.rounds):
        for way in rng.sample(WAYS, len(WAYS)):
            rows[way].append(launch(way, options.target))
    print(f"{options.target}: {options.rounds} rounds, each way a fresh process, random order per round")
    for way in WAYS:
        per_call = [r["per_call_s"] for r in rows[way]]
        ratio = speedup_ci([r["per_call_s"] for r in rows["all"]], per_call)
        print(f"  {way:5s}: per call {statistics.median(per_call) * 1e3:.3f} ms, "
              f"{ratio[0]:.3f}x [{ratio[1]:.3f}, {ratio[2]:.3f}] of all's speed; "
              f"compile {statistics.median(r['compile_s'] for r in rows[way]):.2f} s; "
              f"process {statistics.median(r['wall_s'] for r in rows[way]):.2f} s; "
              f"threads {rows[way][0]['threads'][0]} -> {rows[way][0]['threads'][1]}, cpus {rows[way][0]['cpus']}")


if __name__ == "__main__":
    main()
