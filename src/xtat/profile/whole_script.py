"""What a profiled script keeps, chosen by the whole script's wall time where it will run.

A program's config is confirmed on the program's steady state, but the user runs the script: under
`xtat run` it also pays the launcher and the store's lookup, and a config that saves less than that
makes the script slower. A CPU count or host device count holds for a whole process (start-up,
imports, compiles and every program), so one program's steady state cannot choose it either.

So after the programs are tuned, the whole command is timed in fresh processes, alternating, in
a new random order each round: plain (no xtat), under `xtat run` with the programs' adopted configs,
and under `xtat run` with each offered runtime setup as well (`stages.runtime.runtime_decisions`).
The fastest way whose speedup over plain has its 95% interval wholly above 1 is kept. If none is,
the programs' configs are withdrawn (each gets a result that adopts nothing, with the figure as its
note), so `xtat run` applies XLA's defaults and does not even look them up.

A kept runtime setup is recorded as a workload of its own, `script:NAME`, whose adopted config is
that runtime decision, with the verified trial vetting asks for (the command ran to the end under
it), so that `xtat run` applies it as it applies any other runtime decision. A new choice replaces
the old.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from collections.abc import Callable, Sequence
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
class Way:
    """One way of running the whole command under `xtat run`, timed against the plain command."""

    label: str  # "xtat run" or "xtat run, cpus=1"
    runtime: dict  # the runtime decision it adds: {} or {"cpus": 1} or {"host_devices": 2}
    walls_s: list[float]
    speedup: tuple[float, float, float]  # over plain: the median of the rounds' ratios and its 95% interval

    def describe(self) -> str:
        return f"{self.label}: {self.speedup[0]:.3f}x [{self.speedup[1]:.3f}, {self.speedup[2]:.3f}]"


@dataclass(frozen=True)
class ScriptChoice:
    programs: list[str]  # the programs whose adopted configs were in force while the script was timed
    plain_s: list[float]
    ways: list[Way]
    kept: Way | None  # None: no way was faster than plain beyond its interval
    withdrawn: list[str]  # the programs whose configs were withdrawn because of it

    @property
    def adopted(self) -> dict:
        """The runtime decision kept ({} for none)."""
        return dict(self.kept.runtime) if self.kept else {}

    def describe(self) -> str:
        if not self.ways:
            return "whole script: no program config in force and no runtime decision to try: nothing to time"
        timed = "; ".join(way.describe() for way in self.ways)
        line = f"whole script against plain, {len(self.plain_s)} alternating rounds: {timed}"
        if self.kept is not None:
            return f"{line}; kept {self.kept.label}"
        if self.withdrawn:
            return (f"{line}; none faster beyond noise, so the configs of {', '.join(self.withdrawn)} are withdrawn "
                    "(`xtat run` compiles them with XLA's defaults; `xtat tune --profile` again decides anew)")
        return f"{line}; none faster beyond noise: no runtime decision adopted"

    def to_json(self) -> dict:
        return {"programs": self.programs, "plain_s": self.plain_s,
                "ways": [{"label": w.label, "runtime": w.runtime, "walls_s": w.walls_s, "speedup": list(w.speedup)}
                         for w in self.ways],
                "kept": None if self.kept is None else self.kept.label, "withdrawn": self.withdrawn}


def script_workload(name: str) -> tuple[str, str]:
    """The (fingerprint, program) keys of a script's own record in this environment."""
    program = f"script:{name}"
    env = json.dumps(environment_identity(), sort_keys=True)
    return hashlib.sha256(f"{program}\n{env}".encode()).hexdigest(), program


def choose(name: str, command: list[str], cwd: str, db: str | Path | None, rounds: int, fingerprints: Sequence[str],
           runtime: bool = True, seed: int = 0) -> ScriptChoice:
    """Time the command (run in `cwd`, where it was profiled) plain and each way under `xtat run`,
    keep the fastest way faster beyond noise, and withdraw the configs of `fingerprints` (the
    profile's tuned programs) if there is none. `runtime`: offer the runtime setups too."""
    if rounds < 6:
        raise UserError("the whole-script decision needs at least 6 rounds: fewer give no 95% interval")
    under_run = [sys.executable, "-c", XTAT_COMMAND, "run", *([] if db is None else ["--db", str(db)]), "--",
                 *command]
    _withdraw(script_workload(name)[0], name, db, "choosing the runtime decision again")  # not in the plain arm
    programs = _in_force(db, fingerprints)
    offered: list[tuple[str, dict, ProcessSetup]] = [("xtat run", {}, ProcessSetup())] if programs else []
    for decision in runtime_decisions() if runtime else []:
        for value in decision.values:
            if value != decision.default:
                offered.append((f"xtat run, {decision.id}={value}", {decision.id: value},
                                ProcessSetup(cpus=value if decision.id == CPUS else None,
                                             host_devices=value if decision.id == HOST_DEVICES else None)))
    if not offered:
        return ScriptChoice([], [], [], None, [])
    arms: dict[str, Callable[[], float]] = {"plain": functools.partial(wall, command, ProcessSetup(), cwd, "plain")}
    arms.update({label: functools.partial(wall, under_run, setup, cwd, f"under {label}")
                 for label, _, setup in offered})
    walls = interleave(arms, rounds, warmup=0, seed=seed)
    plain = walls["plain"]
    ways = [Way(label, config, walls[label], speedup_ci(plain, walls[label], seed=seed))
            for label, config, _ in offered]
    kept = max((w for w in ways if w.speedup[1] > 1.0), key=lambda w: w.speedup[0], default=None)
    withdrawn: list[str] = []
    if kept is None:
        figure = "; ".join(w.describe() for w in ways)
        for fingerprint, program in programs.items():
            _withdraw(fingerprint, name, db, f"withdrawn: the whole script {name!r} against plain ({figure}) was "
                                             "not faster beyond noise")
            withdrawn.append(program)
    elif kept.runtime:
        _record(name, kept, plain, db)
    return ScriptChoice(list(programs.values()), plain, ways, kept, withdrawn)


def wall(command: list[str], setup: ProcessSetup, cwd: str | None, label: str) -> float:
    """One whole run of the command under `setup`, in a fresh process, outside any `xtat run` or
    `xtat profile` this process is itself under."""
    env = setup.environment({k: v for k, v in os.environ.items() if k not in ("XTAT_RUN_DB", "XTAT_PROFILE_DIR")})
    affinity = setup.affinity()
    argv = command if affinity is None else [sys.executable, "-c", _AFFINITY, ",".join(map(str, affinity)), *command]
    return timed_run(argv, env, label, cwd)


def _in_force(db: str | Path | None, fingerprints: Sequence[str]) -> dict[str, str]:
    """Of these workloads, those whose decision in force adopts a config: fingerprint -> name."""
    store = open_store(db, read_only=True)
    try:
        found = {}
        for fingerprint in fingerprints:
            record = store.workload(fingerprint)
            latest = store.latest_result(record.id) if record is not None else None
            if record is not None and latest is not None and latest.adopted:
                found[fingerprint] = record.name
        return found
    finally:
        store.close()


def _withdraw(fingerprint: str, name: str, db: str | Path | None, note: str) -> None:
    """A workload's adopted config is no longer in force: a result that adopts nothing is added."""
    store = open_store(db)
    try:
        record = store.workload(fingerprint)
        if record is not None:
            latest = store.latest_result(record.id)
            if latest is not None and latest.adopted:
                run_id = store.begin_run(record.id, {"script": name})
                store.add_result(record.id, run_id, False, {}, None, None, (1.0, 1.0, 1.0), ResultDetail(note=note))
                store.finish_run(run_id)
    finally:
        store.close()


def _record(name: str, way: Way, plain_s: list[float], db: str | Path | None) -> None:
    fingerprint, program = script_workload(name)
    config = {"runtime": way.runtime}
    plain = sorted(plain_s)[len(plain_s) // 2]
    chosen = sorted(way.walls_s)[len(way.walls_s) // 2]
    store = open_store(db)
    try:
        workload_id = store.upsert_workload(fingerprint, program, f"{name} (whole script)", environment_identity(), {})
        run_id = store.begin_run(workload_id, {"script": name, "rounds": len(plain_s)})
        key = config_key(config)
        existing = store.trial(workload_id, key)
        trial_id = existing.id if existing is not None else store.start_trial(workload_id, run_id, config, key)
        if trial_id is None:
            raise UserError(f"the record of {name}'s runtime decision is being written by another process; try again")
        store.finish_trial(trial_id, TrialOutcome(TrialStatus.OK, timing=Timing(
            chosen, samples=tuple(way.walls_s), reference_samples=tuple(plain_s), speedup=way.speedup)))
        store.add_result(workload_id, run_id, True, config, plain, chosen, way.speedup,
                         ResultDetail(note="the whole script, timed plain and under xtat run with each runtime setup"))
        store.finish_run(run_id)
    finally:
        store.close()
