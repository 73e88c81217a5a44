"""How often `xtat tune` adopts on a real workload: N seeded runs, each on a new database.

    .venv/bin/python benchmarks/adoption_rate.py TARGET [--runs 5] [--stages passes] [--budget 20]
        [--options ...] [--expect PASS]

TARGET is as for `xtat tune` (e.g. suite:resnet/train). With --expect, a run counts as
adopting the expected decision when the adopted config switches that pass off. Run
benchmarks/preset_speedup.py first to check the win is real under plain jax.jit.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import xtat
from xtat.capture.targets import load_target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stages", default="passes")
    parser.add_argument("--budget", type=int, default=20)
    parser.add_argument("--expect", help="a pass name the adopted config should switch off")
    args = parser.parse_args()
    adopted = expected = 0
    started = time.perf_counter()
    for seed in range(args.runs):
        with tempfile.TemporaryDirectory() as folder:
            result = xtat.tune(load_target(args.target), db=Path(folder) / "xtat.db",
                               stages=tuple(args.stages.split(",")), budget=args.budget, seed=seed)
        adopted += result.adopted
        hit = bool(args.expect) and result.adopted and result.best_config.get("passes", {}).get(args.expect) is True
        expected += hit
        confirmed = result.confirmed
        search = confirmed.search_speedup if confirmed and confirmed.search_speedup else 0.0
        rounds = result.confirmation.rounds if result.confirmation else 0
        print(f"seed {seed}: {'ADOPTED' if result.adopted else 'not adopted'} {result.speedup:.3f}x "
              f"[{result.speedup_ci[0]:.3f}, {result.speedup_ci[1]:.3f}] (search {search:.3f}x), "
              f"rounds {rounds}, config {json.dumps(result.best_config)}; "
              f"{result.message[:80]}", flush=True)
    print(f"{args.target}: adopted in {adopted} of {args.runs} runs"
          + (f", switching {args.expect} off in {expected}" if args.expect else "")
          + f" ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
