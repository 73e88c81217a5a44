"""Does how side by side places the builds move a runtime setup's figure? In one run's workers,
alternated `--repeats` times, the default's time over a one-CPU build's (both XLA's defaults, so
the figure is the setup's alone), measured three ways:

- `paired`: the default in its worker beside three one-CPU builds sharing one fresh worker, each
  sampled next to a sample of the default of its own (how side by side places and samples three
  finalists with one setup: `ProcessRunner.place`, `ProcessPlacement.sample_pairs`);
- `alone`: the default beside one one-CPU build (how confirmation places them);
- `factor`: one pair of fresh processes as the search's setup factor measures it.

Each placement's rounds are reported twice: its first two rounds, and the rest (side by side
drops the first `WARMUP_ROUNDS`). Prints each repeat and the geometric means. (At 85df5df and
before, side by side sampled each build once a round; docs/search.md has what that read.)

    .venv/bin/python benchmarks/placement_bias.py TARGET [--repeats 6] [--rounds 10]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics

from xtat.capture.targets import load_target
from xtat.capture.workload import capture
from xtat.core.candidate import Candidate, ProcessSetup
from xtat.runner.base import DEFAULT_ID
from xtat.runner.process import ProcessPlacement
from xtat.runner.timing import speedup_ci
from xtat.tuning.session import open_runner
from xtat.tuning.settings import TuneSettings

ONE_CPU = ProcessSetup(cpus=1)
# Three one-CPU builds: XLA's defaults, and two options that change the machine code little.
BUILDS = [("d1", Candidate(process=ONE_CPU)),
          ("level2", Candidate(compile_options={"xla_backend_optimization_level": 2}, process=ONE_CPU)),
          ("width128", Candidate(compile_options={"xla_cpu_prefer_vector_width": 128}, process=ONE_CPU))]


def figures(placement: ProcessPlacement, rounds: int, seed: int) -> tuple[float, float]:
    """The default's time over d1's, each d1 sample next to one of the default: in the placement's
    first two rounds, and in the rest."""
    shuffle = random.Random(seed)
    taken = [placement.sample_pairs(shuffle)["d1"] for _ in range(rounds)]

    def ratio(part: list[tuple[float, float]]) -> float:
        return speedup_ci([default for default, _ in part], [own for _, own in part])[0]
    return ratio(taken[:2]), ratio(taken[2:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target")
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=10, help="rounds per placement (at least 3)")
    options = parser.parse_args()
    if options.rounds < 3 or options.repeats < 1:
        parser.error("--rounds must be at least 3 and --repeats at least 1")
    settings = TuneSettings.at("standard")
    timing = settings.timing
    captured = capture(load_target(options.target))
    rows: list[dict[str, float]] = []
    with open_runner(captured, settings) as runner:
        runner.start()
        for index in range(options.repeats):
            row: dict[str, float] = {}
            row["paired_first2"], row["paired"] = figures(
                runner.place([(DEFAULT_ID, Candidate()), *BUILDS], timing), options.rounds, index)
            row["alone_first2"], row["alone"] = figures(
                runner.place([(DEFAULT_ID, Candidate()), BUILDS[0]], timing), options.rounds, index)
            row["factor"] = runner.spare_pair_ratio(ONE_CPU, timing, f"probe-{index}")
            rows.append(row)
            print(json.dumps({"repeat": index + 1, **{k: round(v, 3) for k, v in row.items()}}), flush=True)
    means = {k: math.exp(statistics.fmean(math.log(r[k]) for r in rows)) for k in rows[0]}
    print(f"{options.target}, geometric means over {len(rows)} repeats (the default's time over a one-CPU "
          f"build's): " + ", ".join(f"{k} {v:.3f}" for k, v in means.items()))


if __name__ == "__main__":
    main()
