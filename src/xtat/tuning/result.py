"""What a tuning run reports: an event per config considered, its finalists, and the result.

Records with `to_json` / `from_json`: a result is stored with its run (results.detail.summary)
so that a rerun that measures nothing new reports the recorded decision, and bench, compare
and the CLI read these records, not dicts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

from xtat.core.space import Config
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
    status: str
    # The config's time in the search, paired: the default's recorded time over its paired speedup
    # (`tuning.measure.search_speedup`), so figures of configs timed minutes apart compare.
    median_s: float | None
    best_s: float | None
    resumed: bool
    spent_s: float  # the trial's cost: compile, verify and time (recorded cost when resumed)


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

    @property
    def confirmed(self) -> bool:
        return self.confirmation is not None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"trial": self.trial, "config": self.config, "median_s": self.median_s,
                                "ci_s": list(self.ci_s), "speedup": self.speedup, "speedup_ci": list(self.speedup_ci)}
        if self.verified_on_second_inputs is not None:
            data["verified_on_second_inputs"] = self.verified_on_second_inputs
        if self.confirmation is not None:
            data.update(search_speedup=self.search_speedup, search_speedup_ci=list(self.search_speedup_ci or ()),
                        confirmation=self.confirmation.to_json())
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finalist:
        confirmation = data.get("confirmation")
        return cls(data["trial"], data["config"], data["median_s"], tuple(data["ci_s"]),
                   data["speedup"], tuple(data["speedup_ci"]),
                   data.get("verified_on_second_inputs"), data.get("search_speedup"),
                   tuple(data["search_speedup_ci"]) if data.get("search_speedup_ci") else None,
                   Confirmation.from_json(confirmation) if confirmation else None)


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
    pareto: list[dict] = field(default_factory=list)  # with --objectives beyond time: the non-dominated trials
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
        data: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "finalists":
                value = [finalist.to_json() for finalist in value]
            elif f.name == "time_split":
                value = asdict(value)
            elif f.name in ("confirmation", "search_load"):
                value = value.to_json() if value is not None else {}
            elif f.name == "history":
                value = [asdict(event) for event in value]
            elif isinstance(value, tuple):
                value = list(value)
            data[f.name] = value
        return data

    def decision_json(self) -> dict[str, Any]:
        """What is stored with the run's result row."""
        document = self.to_json()
        return {name: document[name] for name in self.DECISION}

    @classmethod
    def from_decision(cls, document: dict[str, Any], **call: Any) -> TuneResult:
        """A stored decision (`decision_json`) with this call's fields (`trials`, `new_trials`, ...)."""
        values = {name: document[name] for name in cls.DECISION if name in document}
        for name in ("default_ci_ms", "best_ci_ms", "speedup_ci"):
            values[name] = tuple(values[name])
        values["finalists"] = tuple(Finalist.from_json(f) for f in values.get("finalists", ()))
        confirmation, load = values.get("confirmation"), values.get("search_load")
        values["confirmation"] = Confirmation.from_json(confirmation) if confirmation else None
        values["search_load"] = MachineLoad(**load) if load else None
        recorded = values.get("outcome")  # absent from decisions recorded before outcomes were
        values["outcome"] = AdoptionOutcome(recorded) if recorded else (
            AdoptionOutcome.ADOPTED if values["adopted"] else AdoptionOutcome.NOT_ADOPTED)
        return cls(**values, **call)


def recorded_decision(summary: dict[str, Any]) -> TuneResult:
    """A decision as stored with its result (`TuneResult.decision_json`), read back on its own: no
    call's fields (trials counted, wall time)."""
    return TuneResult.from_decision(summary, trials={}, new_trials=0, wall_s=0.0, time_split=TimeSplit(), db="")
