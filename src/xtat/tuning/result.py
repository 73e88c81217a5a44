"""What a tuning run reports: an event per config considered, and the result."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from xtat.space.space import Config


@dataclass(frozen=True)
class TrialEvent:
    """What the progress display learns after each config."""

    index: int
    config: Config
    status: str
    median_s: float | None
    best_s: float | None
    resumed: bool
    spent_s: float  # the trial's cost: compile, verify and time (recorded cost when resumed)


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
    trials: dict[str, int]
    best_config: Config
    new_trials: int
    message: str
    wall_s: float
    worker_s: float
    db: str
    finalists: list[dict] = field(default_factory=list)
    no_ops: list[str] = field(default_factory=list)  # decisions that never changed the executable
    notes: list[str] = field(default_factory=list)  # e.g. why a stage was left out
    pareto: list[dict] = field(default_factory=list)  # with --objectives beyond time: the non-dominated trials
    history: list[TrialEvent] = field(default_factory=list)  # this run's configs in the order considered
    # The winner deployed through jax.jit in fresh processes (tuning.confirmation); empty when none was.
    confirmation: dict = field(default_factory=dict)
    search_load: dict = field(default_factory=dict)  # the machine's load during the search (runner.load)

    def to_json(self) -> dict:
        return {
            "workload": self.workload, "fingerprint": self.fingerprint,
            "default_ms": self.default_ms, "default_ci_ms": list(self.default_ci_ms),
            "best_ms": self.best_ms, "best_ci_ms": list(self.best_ci_ms),
            "speedup": self.speedup, "speedup_ci": list(self.speedup_ci), "adopted": self.adopted,
            "trials": self.trials, "best_config": self.best_config, "new_trials": self.new_trials,
            "message": self.message, "wall_s": self.wall_s, "worker_s": self.worker_s, "db": self.db,
            "finalists": self.finalists, "no_ops": self.no_ops, "notes": self.notes, "pareto": self.pareto,
            "history": [asdict(event) for event in self.history], "confirmation": self.confirmation,
            "search_load": self.search_load,
        }
