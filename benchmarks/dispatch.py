"""Per-call time of `xtat.jit` against `jax.jit`, interleaved in one process.

    .venv/bin/python benchmarks/dispatch.py [--rounds 41] [--calls 400] [--json]

A tiny function (every leaf times 2 plus 1) on a 1-leaf and a 100-leaf
pytree of float32[8] arrays, in two cases:

- no record: `xtat.jit(f, db=...)` finds nothing for the program and
  compiles with XLA's defaults; the baseline is `jax.jit(f)`.
- adopted: a record adopting compile options for this exact program is
  written straight into a temporary store (how a record was found does not
  change what applying it costs); the baseline is
  `jax.jit(f, compiler_options=<the same options>)`, so both run the same
  executable and the ratio is dispatch alone.

A third contender, `python wrapper`, is the tuned `jax.jit` behind one
plain Python function (`def call(*a, **k): return tuned_jit(*a, **k)`): what
any Python frame between the user and jax costs, the reason `xtat.jit` has
none on its steady-state path.

Each round times `--calls` back-to-back calls of each contender (outputs
blocked on once at the end of the batch), in a new random order every
round. The figure is the median over rounds of time(xtat.jit) /
time(jax.jit), with the exact 95% interval of a median; 1.00 means the same
speed. The issue's target is a median of at most 1.05 in every case.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import warnings
from pathlib import Path

import jax
import numpy as np

import xtat
from xtat.capture.workload import Identity
from xtat.core.space import config_key
from xtat.core.status import TrialStatus
from xtat.runner.timing import speedup_ci
from xtat.store.records import ResultDetail, Timing, TrialOutcome
from xtat.store.sql import Store

ADOPTED_OPTIONS = {"xla_cpu_prefer_vector_width": 128, "xla_backend_optimization_level": 2}


def tiny(tree):
    return jax.tree.map(lambda a: a * 2.0 + 1.0, tree)


def adopt(db: Path, args: tuple, options: dict) -> None:
    identity = Identity.of(jax.jit(tiny).lower(*args))
    store = Store.open(db)
    try:
        workload = store.upsert_workload(identity.fingerprint, identity.program, "tiny", identity.env, {})
        config = {"codegen": options}
        # Vetting applies only a config the store shows measured: an ok trial of it (timing not used here).
        trial = store.start_trial(workload, None, config, config_key(config))
        assert trial is not None  # a new store: nothing has claimed it
        store.finish_trial(trial, TrialOutcome(TrialStatus.OK, timing=Timing(1e-3)))  # timing not used here
        store.add_result(workload, None, True, config, None, None, None,
                         ResultDetail())
    finally:
        store.close()


def batch(call, args: tuple, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        out = call(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / calls


def measure(case: str, leaves: int, rounds: int, calls: int, folder: Path, seed: int) -> dict:
    args = ([np.full((8,), i, np.float32) for i in range(leaves)],)
    args = jax.device_put(args)
    db = folder / f"{case}-{leaves}.db"
    if case == "adopted":
        adopt(db, args, ADOPTED_OPTIONS)
        baseline = jax.jit(tiny, compiler_options=ADOPTED_OPTIONS)
    else:
        baseline = jax.jit(tiny)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no database" is the point of the first case
        tuned = xtat.jit(tiny, db=db)
        for call in (baseline, tuned):
            for _ in range(3):
                jax.block_until_ready(call(*args))
    found = tuned.lookups()[0].found.value
    expected = "adopted" if case == "adopted" else "no database"
    if found != expected:
        raise SystemExit(f"{case}: xtat.jit found {found!r}, expected {expected!r}")
    def wrapper(*a, **k):
        return baseline(*a, **k)

    rng = random.Random(seed)
    times: dict[str, list[float]] = {"jax": [], "xtat": [], "wrapper": []}
    for _ in range(rounds):
        order = [("jax", baseline), ("xtat", tuned), ("wrapper", wrapper)]
        rng.shuffle(order)
        for name, call in order:
            times[name].append(batch(call, args, calls))
    ratio, low, high = speedup_ci(times["xtat"], times["jax"])
    wrapped = speedup_ci(times["wrapper"], times["jax"])
    return {"case": case, "leaves": leaves, "jax_us": float(np.median(times["jax"])) * 1e6,
            "xtat_us": float(np.median(times["xtat"])) * 1e6, "ratio": ratio, "ratio_ci": [low, high],
            "wrapper_us": float(np.median(times["wrapper"])) * 1e6, "wrapper_ratio": wrapped[0],
            "wrapper_ratio_ci": list(wrapped[1:])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for case in ("no record", "adopted"):
            for leaves in (1, 100):
                rows.append(measure(case, leaves, options.rounds, options.calls, Path(folder), options.seed))
    if options.json:
        sys.stdout.write(json.dumps(rows) + "\n")
        return
    print(f"{'case':<10} {'leaves':>6} {'jax.jit us':>11} {'xtat.jit us':>12} {'ratio [95% CI]':>22} "
          f"{'python wrapper ratio [95% CI]':>31}")
    for r in rows:
        print(f"{r['case']:<10} {r['leaves']:>6} {r['jax_us']:>11.2f} {r['xtat_us']:>12.2f} "
              f"{r['ratio']:>8.3f} [{r['ratio_ci'][0]:.3f}, {r['ratio_ci'][1]:.3f}] "
              f"{r['wrapper_ratio']:>16.3f} [{r['wrapper_ratio_ci'][0]:.3f}, {r['wrapper_ratio_ci'][1]:.3f}]")
    worst = max(r["ratio"] for r in rows)
    print(f"largest median ratio {worst:.3f} (target <= 1.05)")


if __name__ == "__main__":
    main()
