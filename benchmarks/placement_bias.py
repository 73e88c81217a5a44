"""Does how side by side places the builds move a runtime setup's figure? In one run's workers,
alternated `--repeats` times, the default's time over a one-CPU build's (both XLA's defaults, so
the figure is the setup's alone), measured four ways:

- `shared`: the default in its worker beside three one-CPU builds sharing one fresh worker (how
  side by side places three finalists with one setup: `ProcessRunner.place`);
- `own`: the default beside three one-CPU builds, each in a process of its own;
- `alone`: the default beside one one-CPU build (how confirmation places them);
- `factor`: one pair of fresh processes as the search's setup factor measures it.

Each placement's rounds are reported twice: its first two rounds, and the rest (side by side
drops the first `WARMUP_ROUNDS`). Prints each repeat and the geometric means.

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
from xtat.runner import protocol as p
from xtat.runner.base import DEFAULT_ID
from xtat.runner.pool import WorkerProcess
from xtat.runner.process import ProcessPlacement, ProcessRunner
from xtat.runner.timing import TimingPolicy, speedup_ci
from xtat.tuning.session import open_runner
from xtat.tuning.settings import TuneSettings

ONE_CPU = ProcessSetup(cpus=1)
# Three one-CPU builds: XLA's defaults, and two options that change the machine code little.
BUILDS = [("d1", Candidate(process=ONE_CPU)),
          ("level2", Candidate(compile_options={"xla_backend_optimization_level": 2}, process=ONE_CPU)),
          ("width128", Candidate(compile_options={"xla_cpu_prefer_vector_width": 128}, process=ONE_CPU))]


def own_processes(runner: ProcessRunner, timing: TimingPolicy) -> tuple[ProcessPlacement, list[WorkerProcess]]:
    """The default in a fresh worker and the three one-CPU builds each in a process of its own; the
    placement and the spare processes started for it (the caller closes them)."""
    default, pinned = runner._worker(ProcessSetup(), fresh=True), runner._worker(ONE_CPU, fresh=True)
    spares = [runner.pool.spare(ONE_CPU, f"placement-bias-{index}") for index in range(len(BUILDS) - 1)]
    for spare in spares:
        runner._load(spare)
    placed = [(DEFAULT_ID, default), *((id, worker) for (id, _), worker in zip(BUILDS, [pinned, *spares], strict=True))]
    for (id, worker), candidate in zip(placed, [Candidate(), *(c for _, c in BUILDS)], strict=True):
        built = runner._compile(worker, id, candidate, is_default=id == DEFAULT_ID)
        assert isinstance(built, p.Compiled), built
    inner = {}
    for id, worker in placed:
        calibrated = worker.request(p.Calibrate(id, timing), runner.measure_deadline_s)
        assert isinstance(calibrated, p.Calibrated), calibrated
        inner[id] = calibrated.inner
    return ProcessPlacement(placed, inner, {}, runner.measure_deadline_s, runner.measure_lock), spares


def figures(placement: ProcessPlacement, rounds: int, seed: int) -> tuple[float, float]:
    """The default's time over d1's: in the placement's first two rounds, and in the rest."""
    shuffle = random.Random(seed)
    taken = [placement.sample_round(shuffle) for _ in range(rounds)]

    def ratio(part: list[dict[str, float]]) -> float:
        return speedup_ci([r[DEFAULT_ID] for r in part], [r["d1"] for r in part])[0]
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
            row["shared_first2"], row["shared"] = figures(
                runner.place([(DEFAULT_ID, Candidate()), *BUILDS], timing), options.rounds, index)
            placement, spares = own_processes(runner, timing)
            try:
                row["own_first2"], row["own"] = figures(placement, options.rounds, index)
            finally:
                for spare in spares:
                    spare.close()
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
