"""Tuner overhead: wall time of a tuning run over the time spent inside workers.

    .venv/bin/python benchmarks/overhead.py [--target T] [--budget 50] [--json]

Worker time is what the workers report for compiling and measuring each new
candidate plus the finalists' interleaved re-measurement; everything else
(capture, process start-up, the default's reference run, store writes,
orchestration) is overhead. Target: at most 1.3. Runs in a fresh temporary
database so every trial is new.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from xtat.capture.targets import load_target
from xtat.tuner import TuneSettings, tune


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="xtat.suite.moe:moe_inference_step")
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    workload = load_target(args.target)
    with tempfile.TemporaryDirectory() as folder:
        result = tune(workload, db=Path(folder) / "overhead.db", settings=TuneSettings(budget=args.budget,
                                                                                     seed=args.seed))
    split = result.time_split  # compiling, verifying and timing in the workers; deciding is all worker time too
    inside = split.compile_s + split.timing_s + split.decide_s
    report = {
        "target": args.target, "trials": result.new_trials, "wall_s": round(result.wall_s, 2),
        "worker_s": round(inside, 2), "overhead_ratio": round(result.wall_s / inside, 3),
        "statuses": result.trials,
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(f"{report['target']}: {report['trials']} trials, wall {report['wall_s']} s, "
              f"inside workers {report['worker_s']} s, overhead ratio {report['overhead_ratio']} (target <= 1.3)")


if __name__ == "__main__":
    main()
