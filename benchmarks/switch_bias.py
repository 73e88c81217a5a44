"""Does the first sample a process gives after the other process ran read a process setup faster
than its next sample does? The measuring processes of `real_code.process_sets` (the ceiling's pairs
and the delivered figures) gave one sample a turn before 2026-12-06 and now drop the first, as the
tuner's placements do (`ProcessPlacement.sample_pairs`). This takes two samples a turn from a default
process and one entering `--setup`, in `--sets` pairs of fresh processes, `--rounds` rounds each in
a random order (two more dropped), and prints the setup's speedup on the first samples and on the
second, and how much slower each process's first sample is than its second.

    .venv/bin/python benchmarks/switch_bias.py TARGET [--setup '{"cpus": 1}'] [--sets 6] [--rounds 15]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_code  # noqa: E402  (a sibling benchmark: fresh measuring processes)


def one_set(commands: dict[str, list[str]], rounds: int, seed: int) -> dict[str, tuple[list[float], list[float]]]:
    """Each process's first and second samples of its turns, rounds in a random order, two dropped."""
    with real_code.serving(commands) as (processes, _):
        samplers = {label: real_code.sampler(process, settle=0) for label, process in processes.items()}
        taken: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label in processes}
        order, shuffle = list(processes), random.Random(seed)
        for index in range(rounds + 2):
            shuffle.shuffle(order)
            for label in order:
                first, second = samplers[label](), samplers[label]()
                if index >= 2:
                    taken[label][0].append(first)
                    taken[label][1].append(second)
        return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target")
    parser.add_argument("--setup", default='{"cpus": 1}', help="the process setup, as ceiling.py writes one")
    parser.add_argument("--sets", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--min-sample", type=float, default=0.05)
    options = parser.parse_args()
    commands = {"default": real_code.serve_command(options.target, options.min_sample),
                "setup": real_code.serve_command(options.target, options.min_sample, "--options", "{}",
                                                 "--setup", json.dumps(json.loads(options.setup)))}
    firsts, seconds = [], []
    for index in range(options.sets):
        taken = one_set(commands, options.rounds, index)
        (d1, d2), (s1, s2) = taken["default"], taken["setup"]
        first = statistics.median(d / s for d, s in zip(d1, s1))
        second = statistics.median(d / s for d, s in zip(d2, s2))
        firsts.append(first)
        seconds.append(second)
        print(f"set {index}: the setup's speedup on first samples {first:.3f}x, on second samples {second:.3f}x; "
              f"first over second: default {statistics.median(a / b for a, b in zip(d1, d2)):.3f}, "
              f"setup {statistics.median(a / b for a, b in zip(s1, s2)):.3f}", flush=True)
    for name, ratios in (("first samples", firsts), ("second samples", seconds)):
        speedup, low, high = real_code.across_pairs(ratios)
        print(f"{name}: {speedup:.3f}x [{low:.3f}, {high:.3f}] over {len(ratios)} pairs of processes")
    gap = statistics.fmean(map(math.log, firsts)) - statistics.fmean(map(math.log, seconds))
    print(f"the setup's speedup on first samples over that on second samples (geometric means): {math.exp(gap):.3f}")


if __name__ == "__main__":
    main()
