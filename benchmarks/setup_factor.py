"""How far one pair of processes' figure for a runtime setup strays: the tuner's setup factor
(`runner.process.ProcessRunner.setup_factor`, the default's time in a default worker over its
time in a worker entering the setup) over `--pairs` pairs of processes, each pair's ratio
printed, with their geometric mean, the spread of their logs, and the t interval of the mean.

A tuning run measures the factor over `setup_pairs` pairs (2 at quick, 3 at standard), more
(up to twice as many) while the standard error of their mean log exceeds `setup_error`, and
scales every such candidate's paired figure by it; this shows, over exactly `--pairs` pairs,
what that many can tell apart on a program.

    .venv/bin/python benchmarks/setup_factor.py TARGET [--cpus 1 | --host-devices 2] [--pairs 8] \
        [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

from xtat.capture.targets import load_target
from xtat.capture.workload import capture
from xtat.core.candidate import ProcessSetup
from xtat.tuning.session import open_runner
from xtat.tuning.settings import TuneSettings

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_code  # noqa: E402  (a sibling benchmark: the statistics across pairs of processes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target")
    parser.add_argument("--cpus", type=int, default=None, help="the setup's CPU count (default: 1)")
    parser.add_argument("--host-devices", type=int, default=None, help="the setup's host device count")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--json", default=None)
    options = parser.parse_args()
    if options.pairs < 2:
        parser.error("--pairs must be at least 2 (the spread needs two)")
    cpus = options.cpus if options.cpus is not None or options.host_devices is not None else 1
    setup = ProcessSetup(cpus, options.host_devices)
    settings = TuneSettings.at("standard", setup_pairs=options.pairs, setup_error=0.0)
    captured = capture(load_target(options.target))
    with open_runner(captured, settings) as runner:
        runner.start()
        started = time.perf_counter()
        ratios = runner.setup_ratios(setup, settings.timing)
        took = time.perf_counter() - started
    factor, low, high = real_code.across_pairs(list(ratios))
    spread = statistics.stdev(math.log(r) for r in ratios)
    for index, ratio in enumerate(ratios, 1):
        print(f"pair {index}: {ratio:.3f}")
    print(f"{options.target} {setup.describe()}: factor {factor:.3f}x [{low:.3f}, {high:.3f}] over {len(ratios)} "
          f"pairs of processes; sd of a pair's log ratio {spread:.3f}; {took:.0f} s")
    if options.json:
        with open(options.json, "w") as out:
            json.dump({"target": options.target, "setup": setup.to_json(), "ratios": list(ratios),
                       "factor": factor, "ci": [low, high], "log_sd": spread, "seconds": took}, out, indent=1)


if __name__ == "__main__":
    main()
