"""The tuner's scheduling overhead at scale: trials per hour against the number of workers.

    export XTAT_DB="$(./scripts/postgres)"        # a PostgreSQL server's database
    .venv/bin/python benchmarks/scale_overhead.py [--workers 1,2,4,8,16] [--trials-per-worker 12]
                                                  [--compile 0.5] [--measure 1.5] [--json rows.json]

What is measured is xtat's own machinery, not XLA: the search loop, the PostgreSQL store (a fresh
database per row, made on the server of $XTAT_DB or --db), the Ray executor (a local Ray with
one CPU per worker), leases and heartbeat. Only the candidates are fake:
`SleepingWorker`, a TEST DOUBLE of `runner.ray.NodeWorker`, "compiles" by sleeping --compile
seconds and "times" by sleeping --measure seconds, then answers with a distinct executable
and a made-up time; the local part (reference and confirmation) is `tests/support/doubles.FakeRunner`,
another test double.

Each row is one tuning run of a tiny program with the random strategy over every stage, budget
workers x --trials-per-worker. Its search window runs from the default's result to the last
trial's; in it, every worker can be busy workers x window seconds, and is busy (compile +
measure) seconds per trial. Busy is the ratio; the scheduling overhead per trial is the idle
worker time per trial, (workers x window - busy time) / trials.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))  # the test doubles (tests/support/doubles.py)

import xtat  # noqa: E402
from doubles import FakeRunner, fake_runner_factory  # noqa: E402
from xtat.store.sql import default_location  # noqa: E402
from xtat.tuning.session import open_ray_runner  # noqa: E402


class SleepingWorker:
    """A TEST DOUBLE of `runner.ray.NodeWorker`: every candidate takes a fixed time, nothing runs."""

    def __init__(self, exported: bytes, inputs: list, verify_inputs: list | None, platform: str,
                 deadlines: tuple[float, float, float], *layout: object, compile_s: float = 0.5,
                 measure_s: float = 1.5):  # `layout`: NodeWorker's dims, layout_in_program and devices, unused
        self.compile_s, self.measure_s = compile_s, measure_s

    def describe(self) -> dict:
        from xtat.capture.workload import environment_identity
        from xtat.runner.ray import node_name

        return {"node": node_name(), "env": environment_identity()}

    def start(self) -> None:
        pass

    def set_deadlines(self, compile_s: float, measure_s: float) -> None:
        pass

    def build(self, id, candidate, program, is_default):
        from xtat.runner.protocol import Compiled

        time.sleep(self.compile_s)
        key = hashlib.sha256(json.dumps(candidate.compile_options, sort_keys=True, default=str).encode()
                             + json.dumps(candidate.program, sort_keys=True, default=str).encode()).hexdigest()
        return Compiled(self.compile_s, f"{key}-{id}", {}, cached=False)  # every candidate its own executable

    def measure(self, id, candidate, tolerance, timing, is_default, race):
        from xtat.runner.protocol import Check, Timed

        time.sleep(self.measure_s)
        seconds = 1e-3 * (1.0 + (int(hashlib.sha256(id.encode()).hexdigest(), 16) % 100) / 1000)
        samples = (seconds,) * timing.samples
        reference = () if is_default else (1e-3,) * timing.samples  # a candidate is timed in pairs with it
        return Timed(samples, 1, seconds, (seconds, seconds), self.measure_s, False, Check(True, 0.0, 0.0),
                     reference)

    def release(self, id, candidate) -> None:
        pass


def program(x):
    return jnp.tanh(x @ x.T).sum()


@contextmanager
def fresh_database(server: str):
    import psycopg

    name = f"xtat_overhead_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(server, autocommit=True) as con:
            con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_row(server: str, workers: int, per_worker: int, compile_s: float, measure_s: float) -> dict:
    local = fake_runner_factory(FakeRunner(time_of=lambda candidate: 1e-3))

    class Worker(SleepingWorker):  # the timings of this row, as Ray constructs the actor
        def __init__(self, *args):
            super().__init__(*args, compile_s=compile_s, measure_s=measure_s)

    def runner(captured, settings):
        return open_ray_runner(captured, settings, worker_class=Worker, local_runner=local)

    events: list[float] = []
    budget = workers * per_worker + 1
    workload = xtat.Workload(program, (np.ones((64, 64), np.float32),), name=f"overhead-{workers}")
    with fresh_database(server) as url:
        result = xtat.tune(workload, db=url, runner=runner, executor="ray", workers=workers, strategy="random",
                           budget=budget, on_trial=lambda event: events.append(time.perf_counter()))
    trials = len(events) - 1  # the default's result opens the window
    window = events[-1] - events[0]
    busy = trials * (compile_s + measure_s)
    return {"workers": workers, "trials": trials, "window_s": round(window, 2),
            "trials_per_hour": round(trials / window * 3600),
            "busy": round(busy / (workers * window), 3),
            "overhead_per_trial_s": round((workers * window - busy) / trials, 3),
            "statuses": result.trials}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="1,2,4,8,16")
    parser.add_argument("--trials-per-worker", type=int, default=12)
    parser.add_argument("--compile", type=float, default=0.5)
    parser.add_argument("--measure", type=float, default=1.5)
    parser.add_argument("--db", default=None, help="a postgresql:// URL (default $XTAT_DB)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    import ray

    server = str(args.db or default_location())
    if not server.startswith("postgresql://"):
        sys.exit("give a PostgreSQL server: --db postgresql://... or XTAT_DB=\"$(./scripts/postgres)\"")
    counts = [int(n) for n in args.workers.split(",")]
    ray.init(num_cpus=max(counts), include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    rows = []
    try:
        print("| workers | trials | search window s | trials per hour | workers busy | overhead per trial s |")
        print("|---|---|---|---|---|---|")
        for workers in counts:
            row = run_row(server, workers, args.trials_per_worker, args.compile, args.measure)
            rows.append(row)
            print(f"| {row['workers']} | {row['trials']} | {row['window_s']} | {row['trials_per_hour']} | "
                  f"{row['busy']:.1%} | {row['overhead_per_trial_s']} |", flush=True)
    finally:
        ray.shutdown()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
