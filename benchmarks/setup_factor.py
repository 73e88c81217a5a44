"""How far a runtime setup's figure strays: the tuner's setup factor
(`runner.process.ProcessRunner.setup_factor`, the default's time in a default worker over its
time in a worker entering the setup) over `--pairs` pairs of processes, each pair's ratio
printed, with their geometric mean, the spread of their logs, and the t interval of the mean.

A tuning run measures the factor over `setup_pairs` pairs (2 at quick, 3 at standard), more
(up to twice as many) while the standard error of their mean log exceeds `setup_error`, and
scales every such candidate's paired figure by it; this shows, over exactly `--pairs` pairs,
what that many can tell apart on a program.

With `--side-by-side ROUNDS`, each run then measures what adoption's side by side would read for
a config holding only the setup (`ProcessRunner.interleave`: the default in a default worker and
in a worker entering the setup, in fresh workers, the rounds split over as many placements as the
factor took pairs), and prints the two figures together: a finalist with a runtime decision has
its search figure from the first and its side-by-side figure from the second. `--repeats` runs
the whole again in new workers (a run's factor is measured once), and counts the runs whose two
figures lie within 10% of each other.

With `--as-called`, the factor and the side-by-side figure are measured with the default deployed
as the user's step is called (`ProcessRunner.measure_setups_as`, `deployed_ratios`: the tuner's
way where jax's host work on the step's argument tree is 5% or more of a call), over exactly
`--pairs` pairs. With `--blocks N`, each run first times the run's own two workers' ratio in N
blocks one after another, of the flat pair's rounds each: how far one pair of processes moves
from block to block.

    .venv/bin/python benchmarks/setup_factor.py TARGET [--cpus 1 | --host-devices 2] [--pairs 8] \
        [--side-by-side 21] [--as-called] [--blocks 8] [--repeats 5] [--json OUT.json]
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
from xtat.capture.workload import Capture, capture
from xtat.core.candidate import Candidate, ProcessSetup
from xtat.runner.base import DEFAULT_ID, Deployment
from xtat.runner.timing import speedup_ci
from xtat.tuning.session import open_runner
from xtat.tuning.settings import TuneSettings

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_code  # noqa: E402  (a sibling benchmark: the statistics across pairs of processes)


def one_run(captured: Capture, setup: ProcessSetup, settings: TuneSettings, side_rounds: int,
            as_called: bool = False, blocks: int = 0) -> dict:
    """One run's factor, in new workers, and (`side_rounds` > 0) the setup's side-by-side figure after it;
    `as_called`, both with the default deployed as called; `blocks`, first the own pair's flat blocks."""
    deploy = Deployment(settings.tolerance, as_called=True) if as_called else None
    with open_runner(captured, settings) as runner:
        runner.start()
        drift = []
        if blocks:
            sides = runner._reference(settings.timing), runner._reference(settings.timing, setup)
            drift = [runner._process_ratio(*sides, settings.timing) for _ in range(blocks)]
        if deploy is not None:
            runner.measure_setups_as(deploy)
        started = time.perf_counter()
        ratios = runner.setup_ratios(setup, settings.timing)
        took = time.perf_counter() - started
        factor, low, high = real_code.across_pairs(list(ratios))
        row = {"ratios": list(ratios), "factor": factor, "ci": [low, high], "seconds": took,
               "log_sd": statistics.stdev(math.log(r) for r in ratios) if len(ratios) > 1 else 0.0,
               "blocks": drift}
        if side_rounds:
            pairs = runner.interleave([(DEFAULT_ID, Candidate()), ("setup", Candidate(process=setup))],
                                      side_rounds, settings.timing, deploy)
            if pairs is None or not pairs.get("setup"):
                raise SystemExit(f"side by side: {'the default' if pairs is None else 'the setup'} did not build")
            side, side_low, side_high = speedup_ci([d for d, _ in pairs["setup"]], [own for _, own in pairs["setup"]],
                                                   seed=settings.seed)
            row["side_by_side"] = [side, side_low, side_high]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target")
    parser.add_argument("--cpus", type=int, default=None, help="the setup's CPU count (default: 1)")
    parser.add_argument("--host-devices", type=int, default=None, help="the setup's host device count")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--side-by-side", type=int, default=0, metavar="ROUNDS",
                        help="also the setup's side-by-side figure over this many rounds (0: not measured)")
    parser.add_argument("--as-called", action="store_true", help="the default deployed as the user's step is called")
    parser.add_argument("--blocks", type=int, default=0, help="first, the own pair's flat ratio in this many blocks")
    parser.add_argument("--repeats", type=int, default=1, help="runs, each in new workers")
    parser.add_argument("--json", default=None)
    options = parser.parse_args()
    if options.pairs < 2:
        parser.error("--pairs must be at least 2 (the spread needs two)")
    if options.repeats < 1 or options.side_by_side < 0 or options.blocks < 0:
        parser.error("--repeats must be at least 1, --side-by-side and --blocks at least 0")
    cpus = options.cpus if options.cpus is not None or options.host_devices is not None else 1
    setup = ProcessSetup(cpus, options.host_devices)
    settings = TuneSettings.at("standard", setup_pairs=options.pairs, setup_error=0.0)
    captured = capture(load_target(options.target))
    runs = []
    for index in range(1, options.repeats + 1):
        row = one_run(captured, setup, settings, options.side_by_side, options.as_called, options.blocks)
        runs.append(row)
        if row["blocks"]:
            print(f"run {index}: the own pair's flat ratio in {len(row['blocks'])} blocks: "
                  f"{', '.join(f'{r:.3f}' for r in row['blocks'])}", flush=True)
        low, high = row["ci"]
        line = (f"run {index}: factor {row['factor']:.3f}x [{low:.3f}, {high:.3f}] over {len(row['ratios'])} pairs "
                f"({', '.join(f'{r:.3f}' for r in row['ratios'])}); sd of a pair's log ratio {row['log_sd']:.3f}; "
                f"{row['seconds']:.0f} s")
        if "side_by_side" in row:
            side = row["side_by_side"]
            line += (f"; side by side {side[0]:.3f}x [{side[1]:.3f}, {side[2]:.3f}], "
                     f"{side[0] / row['factor']:.3f} of the factor")
        print(line, flush=True)
    factors = ", ".join(f"{row['factor']:.3f}" for row in runs)
    print(f"{options.target} {setup.describe()}: factors {factors}")
    if options.side_by_side:  # as search_campaign.py counts a finalist's two figures
        near = sum(abs(row["factor"] / row["side_by_side"][0] - 1) <= 0.10 for row in runs)
        print(f"side by side within 10% of the factor in {near} of {len(runs)} runs")
    if options.json:
        with open(options.json, "w") as out:
            json.dump({"target": options.target, "setup": setup.to_json(), "pairs": options.pairs,
                       "side_by_side_rounds": options.side_by_side, "as_called": options.as_called,
                       "runs": runs}, out, indent=1)


if __name__ == "__main__":
    main()
