"""The runtime decision of a profiled script, chosen by the whole script's wall time.

A CPU count or host device count holds for a whole process: start-up, imports, compiles and every
program run under it. One program's steady state cannot choose it (a decoder that prefers one CPU
in its loop can lose more in its compiles than it gains). So each offered runtime setup
(`stages.runtime.runtime_decisions`) is timed as the whole command, in fresh processes, against
the command without it, both under `xtat run` with the store (the programs' adopted compile
options applied in both), in alternating rounds; the fastest setup whose interval lies wholly
above 1 is adopted.

It is recorded as a workload of its own, `script:NAME`, whose adopted config is that runtime
decision, with the verified trial vetting asks for (the command ran to the end under it), so that
`xtat run` applies it as it applies any other runtime decision. A new choice replaces the old.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from xtat.capture.workload import environment_identity
from xtat.core.candidate import ProcessSetup
from xtat.core.errors import UserError
from xtat.core.space import config_key
from xtat.core.status import TrialStatus
from xtat.profile.session import XTAT_COMMAND, timed_run
from xtat.runner.timing import interleave, speedup_ci
from xtat.stages.runtime import CPUS, HOST_DEVICES, runtime_decisions
from xtat.store import open_store
from xtat.store.records import ResultDetail, Timing, TrialOutcome

# Enter a CPU affinity, then become the rest of the command line (affinity is kept across exec).
_AFFINITY = "import os, sys; os.sched_setaffinity(0, [int(c) for c in sys.argv[1].split(',')]); " \
            "os.execvp(sys.argv[2], sys.argv[2:])"


@dataclass(frozen=True)
class RuntimeTrial:
    """One runtime setup timed as the whole command against none."""

    config: dict  # {"cpus": 1} or {"host_devices": 2}
    plain_s: list[float]
    with_s: list[float]
    speedup: tuple[float, float, float]


@dataclass(frozen=True)
class RuntimeChoice:
    trials: list[RuntimeTrial]
    adopted: dict  # {} when no setup made the whole script faster beyond its interval

    def describe(self) -> str:
        if not self.trials:
            return "no runtime decision to try on this machine"
        tried = "; ".join(f"{json.dumps(t.config)}: {t.speedup[0]:.3f}x [{t.speedup[1]:.3f}, {t.speedup[2]:.3f}]"
                          for t in self.trials)
        chosen = json.dumps(self.adopted) if self.adopted else "none (no interval wholly above 1)"
        return f"whole script under each runtime setup: {tried}; adopted {chosen}"


def script_workload(name: str) -> tuple[str, str]:
    """The (fingerprint, program) keys of a script's own record in this environment."""
    program = f"script:{name}"
    env = json.dumps(environment_identity(), sort_keys=True)
    return hashlib.sha256(f"{program}\n{env}".encode()).hexdigest(), program


def choose(name: str, command: list[str], cwd: str, db: str | Path | None, rounds: int,
           seed: int = 0) -> RuntimeChoice:
    """Time each offered runtime setup as the whole command (run in `cwd`, where it was profiled) and
    record the one adopted."""
    if rounds < 6:
        raise UserError("the runtime decision needs at least 6 rounds per setup: fewer give no 95% interval")
    under_run = [sys.executable, "-c", XTAT_COMMAND, "run", *([] if db is None else ["--db", str(db)]), "--",
                 *command]
    _forget(name, db)  # the old choice must not be applied to the plain arm
    trials = []
    for decision in runtime_decisions():
        for value in decision.values:
            if value == decision.default:
                continue
            config = {decision.id: value}
            setup = ProcessSetup(cpus=value if decision.id == CPUS else None,
                                 host_devices=value if decision.id == HOST_DEVICES else None)
            walls = interleave({"plain": functools.partial(_wall, under_run, ProcessSetup(), cwd),
                                "with": functools.partial(_wall, under_run, setup, cwd)}, rounds, warmup=0, seed=seed)
            plain, under = walls["plain"], walls["with"]
            trials.append(RuntimeTrial(config, plain, under, speedup_ci(plain, under, seed=seed)))
    above = [t for t in trials if t.speedup[1] > 1.0]
    best = max(above, key=lambda t: t.speedup[0], default=None)
    choice = RuntimeChoice(trials, dict(best.config) if best else {})
    if best is not None:
        _record(name, best, db)
    return choice


def _wall(command: list[str], setup: ProcessSetup, cwd: str) -> float:
    env = setup.environment({k: v for k, v in os.environ.items() if k not in ("XTAT_PROFILE_DIR",)})
    affinity = setup.affinity()
    argv = command if affinity is None else [sys.executable, "-c", _AFFINITY, ",".join(map(str, affinity)), *command]
    return timed_run(argv, env, f"under {setup.describe() or 'no setup'}", cwd)


def _forget(name: str, db: str | Path | None) -> None:
    """An earlier choice is no longer adopted (a result that adopts nothing is added)."""
    fingerprint, _ = script_workload(name)
    store = open_store(db)
    try:
        record = store.workload(fingerprint)
        if record is not None:
            latest = store.latest_result(record.id)
            if latest is not None and latest.adopted:
                run_id = store.begin_run(record.id, {"script": name})
                store.add_result(record.id, run_id, False, {}, None, None, (1.0, 1.0, 1.0),
                                 ResultDetail(note="choosing the runtime decision again"))
                store.finish_run(run_id)
    finally:
        store.close()


def _record(name: str, trial: RuntimeTrial, db: str | Path | None) -> None:
    fingerprint, program = script_workload(name)
    config = {"runtime": trial.config}
    plain = sorted(trial.plain_s)[len(trial.plain_s) // 2]
    chosen = sorted(trial.with_s)[len(trial.with_s) // 2]
    store = open_store(db)
    try:
        workload_id = store.upsert_workload(fingerprint, program, f"{name} (whole script)", environment_identity(), {})
        run_id = store.begin_run(workload_id, {"script": name, "rounds": len(trial.plain_s)})
        key = config_key(config)
        existing = store.trial(workload_id, key)
        trial_id = existing.id if existing is not None else store.start_trial(workload_id, run_id, config, key)
        if trial_id is None:
            raise UserError(f"the record of {name}'s runtime decision is being written by another process; try again")
        store.finish_trial(trial_id, TrialOutcome(TrialStatus.OK, timing=Timing(
            chosen, samples=tuple(trial.with_s), reference_samples=tuple(trial.plain_s), speedup=trial.speedup)))
        store.add_result(workload_id, run_id, True, config, plain, chosen, trial.speedup,
                         ResultDetail(note="the whole script, timed under each runtime setup against none"))
        store.finish_run(run_id)
    finally:
        store.close()
