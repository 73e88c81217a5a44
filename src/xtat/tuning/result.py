"""What a tuning run reports: an event per config considered, its finalists, and the result.

Records, serialised by `core.serial`: a result is stored with its run (`ResultDetail.summary`)
so that a rerun that measures nothing new reports the recorded decision, and bench, compare
and the CLI read these records, not dicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from xtat.core import serial
from xtat.core.space import Config
from xtat.core.status import TrialStatus
from xtat.model.objectives import ParetoPoint
from xtat.runner.load import MachineLoad
from xtat.tuning.confirmation import Confirmation


class AdoptionOutcome(StrEnum):
    """Why a run adopted its winner or kept the default: the closed vocabulary behind `message`."""

    ADOPTED = "adopted"  # confirmed faster in fresh processes
    ADOPTED_UNDER_LOAD = "adopted_under_load"  # confirmed faster under load, with --adopt-under-load
    NO_CANDIDATE = "no_candidate"  # no config's paired search figure cleared the tie margin
    REMEASURE_FAILED = "remeasure_failed"  # the finalists' side-by-side re-measurement failed
    DEFAULT_FAILED = "default_failed"  # the default failed to rebuild for the re-measurement
    NOT_FASTER = "not_faster"  # side by side, no finalist was faster beyond the tie margin
    DEMOTED = "demoted"  # the faster finalists failed re-verification on make_inputs(1)
    CONFIRMATION_FAILED = "confirmation_failed"  # the confirmation's processes failed
    LOAD_DEPENDENT = "load_dependent"  # confirmed faster, but while other processes used the machine
    TIE = "tie"  # confirmed faster, by less than the tie margin
    SLOWER = "slower"  # the confirmation's interval lies below the tie margin
    INCONCLUSIVE = "inconclusive"  # the confirmation's interval still straddles the tie margin
    NOT_ADOPTED = "not_adopted"  # a decision recorded before outcomes were, that kept the default

    @property
    def adopted(self) -> bool:
        return self in (AdoptionOutcome.ADOPTED, AdoptionOutcome.ADOPTED_UNDER_LOAD)


@dataclass(frozen=True)
class TrialEvent:
    """What the progress display learns after each config."""

    index: int
    config: Config
    status: TrialStatus
    # The config's time in the search, paired: the default's recorded time over its paired speedup
    # (`tuning.measure.search_speedup`), so figures of configs timed minutes apart compare.
    median_s: float | None
    best_s: float | None
    resumed: bool
    spent_s: float  # the trial's cost: compile, verify and time (recorded cost when resumed)


@dataclass(frozen=True)
class TrialPoint:
    """One considered config of a search as a convergence figure needs it: its time and its cost."""

    median_s: float | None  # None when the config failed (any status but ok/duplicate)
    spent_s: float  # the trial's cost: compile, verify and time


@dataclass(frozen=True)
class TimeSplit:
    """Where a run's wall time went."""

    search_s: float = 0.0  # the search loop, from the default's measurement to its last trial
    compile_s: float = 0.0  # compiling new candidates, summed over the compile slots (side by side)
    timing_s: float = 0.0  # verifying and timing them, one at a time (waits for the measuring lock included)
    decide_s: float = 0.0  # re-measuring the finalists side by side, re-verifying and confirming the winner
    wall_s: float = 0.0  # the whole call: capture, the default's start, search and decision

    def describe(self) -> str:
        other = max(0.0, self.wall_s - self.search_s - self.decide_s)
        return (f"search {self.search_s:.0f} s (compiling {self.compile_s:.0f} s over its slots, verifying and "
                f"timing {self.timing_s:.0f} s), deciding {self.decide_s:.0f} s, other {other:.0f} s")


@dataclass(frozen=True)
class Finalist:
    """A config re-measured side by side with the default after the search; the one that went on
    to confirmation carries its confirmed figures, and the side-by-side ones as `search_*`."""

    trial: int  # its trial's id
    config: Config
    median_s: float
    ci_s: tuple[float, float]
    speedup: float  # the default's time / its time, paired by round
    speedup_ci: tuple[float, float]
    verified_on_second_inputs: bool | None = None  # None: not checked (no make_inputs, or not faster)
    search_speedup: float | None = None
    search_speedup_ci: tuple[float, float] | None = None
    confirmation: Confirmation | None = None
    # The trial of its part that stands for it (`tuning.adoption.outdone_by_part`): it is listed, never confirmed.
    gave_way_to: int | None = None
    # A finalist with a process setup, confirmed faster as was one without: the two confirmed head to head,
    # this config against the other (`tuning.adoption.settle_kinds`).
    head_to_head: Confirmation | None = None

    @property
    def confirmed(self) -> bool:
        return self.confirmation is not None

    def to_json(self) -> dict[str, Any]:
        return serial.dump(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finalist:
        return serial.load(cls, data)


@dataclass(frozen=True)
class TuneResult:
    workload: str
    fingerprint: str
    default_ms: float
    default_ci_ms: tuple[float, float]
    best_ms: float
    best_ci_ms: tuple[float, float]
    speedup: float
    speedup_ci: tuple[float, float]
    adopted: bool
    outcome: AdoptionOutcome  # why it was adopted or not (`message` says it in words)
    trials: dict[str, int]  # every recorded trial of the workload, by status
    best_config: Config  # the adopted config ({} when none was)
    new_trials: int
    message: str
    wall_s: float
    time_split: TimeSplit
    db: str
    finalists: tuple[Finalist, ...] = ()  # fastest side-by-side speedup first
    no_ops: list[str] = field(default_factory=list)  # decisions that never changed the executable
    notes: list[str] = field(default_factory=list)  # e.g. why a stage was left out
    pareto: list[ParetoPoint] = field(default_factory=list)  # with --objectives beyond time: the non-dominated trials
    history: list[TrialEvent] = field(default_factory=list)  # this run's configs in the order considered
    # The winner deployed through jax.jit in fresh processes (tuning.confirmation); None when none was.
    confirmation: Confirmation | None = None
    search_load: MachineLoad | None = None  # the machine's load during the search (runner.load)
    recorded: bool = False  # the decision of an earlier run on the same trials, reported again

    @property
    def confirmed(self) -> Finalist | None:
        """The finalist that went on to confirmation, if one did."""
        return next((f for f in self.finalists if f.confirmed), None)

    # The fields of a run's decision, stored with it; the rest are about this call.
    DECISION = ("workload", "fingerprint", "default_ms", "default_ci_ms", "best_ms", "best_ci_ms", "speedup",
                "speedup_ci", "adopted", "outcome", "best_config", "message", "finalists", "no_ops", "notes",
                "confirmation", "search_load")

    def to_json(self) -> dict[str, Any]:
        return serial.dump(self)

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> TuneResult:
        """The inverse of `to_json` (a record file of `xtat compare`); ValueError if it is malformed."""
        return serial.load(cls, _upgraded(document))

    def decision_json(self) -> dict[str, Any]:
        """What is stored with the run's result row."""
        document = self.to_json()
        return {name: document[name] for name in self.DECISION}

    @classmethod
    def from_decision(cls, document: dict[str, Any], **call: Any) -> TuneResult:
        """A stored decision (`decision_json`) with this call's fields (`trials`, `new_trials`, ...)."""
        decision = {name: value for name, value in _upgraded(document).items() if name in cls.DECISION}
        return serial.load(cls, {**decision, **call})


def _upgraded(document: dict[str, Any]) -> dict[str, Any]:
    """A decision or result written by an earlier xtat, in today's form: an absent confirmation or
    load was written as {}, and decisions before outcomes had none."""
    data = {**document}
    for name in ("confirmation", "search_load"):
        if data.get(name) == {}:
            data[name] = None
    if "outcome" not in data:
        data["outcome"] = AdoptionOutcome.ADOPTED if data.get("adopted") else AdoptionOutcome.NOT_ADOPTED
    return data


def recorded_decision(summary: dict[str, Any]) -> TuneResult:
    """A decision as stored with its result (`TuneResult.decision_json`), read back on its own: no
    call's fields (trials counted, wall time)."""
    return TuneResult.from_decision(summary, trials={}, new_trials=0, wall_s=0.0, time_split=TimeSplit(), db="")
