"""The user's own figure: the whole script, plain and under `xtat run`, alternating.

`xtat run --compare N -- COMMAND` runs the command N times each way, in a new random order each
round, in fresh processes with their output discarded, and reports the end-to-end speedup (the
median of the rounds' ratios, with its exact 95% interval: `runner.timing.speedup_ci`). Beside it:
what the newest profile of the script and the adopted configs predict. A program with share `f`
of the script's time whose config is `s` times faster saves `f (1 - 1/s)` of it, so the programs
together predict `1 / (1 - sum f (1 - 1/s))`; programs with nothing adopted count as 1.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from xtat.apply.lookup import Found, lookup
from xtat.capture.workload import Identity
from xtat.core.candidate import ProcessSetup
from xtat.core.errors import UserError
from xtat.profile.session import XTAT_COMMAND, Profile
from xtat.profile.whole_script import wall
from xtat.runner.timing import interleave, speedup_ci
from xtat.store.records import ProfiledProgram


@dataclass(frozen=True)
class ProgramGain:
    """One profiled program: its share of the plain script's time and its adopted speedup (1 if none)."""

    name: str
    fingerprint: str
    share: float
    speedup: float
    found: str  # what the store says for it (`apply.lookup.Found`)


@dataclass(frozen=True)
class ScriptFigure:
    rounds: int
    plain_s: list[float]
    tuned_s: list[float]
    speedup: tuple[float, float, float]  # median ratio of the rounds, and its 95% interval
    predicted: float | None  # from the profile's shares and the adopted speedups; None without a profile
    programs: list[ProgramGain]


def compare(command: list[str], db: str | Path | None, rounds: int, profile: Profile | None,
            seed: int = 0) -> ScriptFigure:
    if rounds < 2:
        raise UserError("--compare needs at least 2 rounds to give an interval")
    tuned = [sys.executable, "-c", XTAT_COMMAND, "run", *([] if db is None else ["--db", str(db)]), "--",
             *command]
    # Whole runs, alternating in a new random order each round; no warm-up round: each is a fresh process.
    walls = interleave({"plain": lambda: wall(command, ProcessSetup(), None, "plain"),
                        "tuned": lambda: wall(tuned, ProcessSetup(), None, "under xtat run")},
                       rounds, warmup=0, seed=seed)
    plain_s, tuned_s = walls["plain"], walls["tuned"]
    gains = [] if profile is None else [_gain(p, db) for p in profile.programs]
    saved = sum(g.share * (1 - 1 / g.speedup) for g in gains)
    predicted = None if profile is None else 1 / (1 - saved) if saved < 1 else float("inf")
    return ScriptFigure(rounds, plain_s, tuned_s, speedup_ci(plain_s, tuned_s, seed=seed), predicted, gains)


def _gain(program: ProfiledProgram, db: str | Path | None) -> ProgramGain:
    from xtat.capture.workload import environment_identity

    identity = Identity(program=program.program, fingerprint=program.fingerprint, env=environment_identity(),
                        avals=program.avals)
    found = lookup(identity, db)
    speedup = 1.0
    if found.found is Found.ADOPTED and not (found.candidate.program or found.candidate.layout):
        speedup = _confirmed_speedup(db, program.fingerprint)
    return ProgramGain(program.name, program.fingerprint, program.share, speedup, found.found.value)


def _confirmed_speedup(db: str | Path | None, fingerprint: str) -> float:
    from xtat.store import open_store

    store = open_store(db, read_only=True)
    try:
        record = store.workload(fingerprint)
        result = store.latest_result(record.id) if record else None
        return float(result.speedup) if result and result.adopted and result.speedup else 1.0
    finally:
        store.close()
