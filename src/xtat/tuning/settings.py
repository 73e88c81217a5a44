"""What a tuning run is asked to do."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from xtat.core.errors import UserError
from xtat.core.space import Config
from xtat.model.objectives import OBJECTIVES, Objective
from xtat.runner.base import Executor, ExecutorKind
from xtat.runner.timing import TimingPolicy
from xtat.runner.verify import Tolerance
from xtat.stages.order import STAGE_ORDER


class Formulation(StrEnum):
    """How the stages' spaces are derived and searched (XTAT-M)."""

    JOINT = "joint"  # one space over every stage, each derived on the default program
    STAGED = "staged"  # a stage at a time, each on the program the frozen earlier decisions produce
    ALTERNATING = "alternating"  # rounds of staged until a round brings no improvement


FORMULATIONS = tuple(f.value for f in Formulation)


class Effort(StrEnum):
    """How much a run may spend, as Helion's autotune effort: each a preset of the search's budget,
    the finalists and the confirmation's length (`TuneSettings.at`). The search order (global decisions
    first, by the decision prior: `search.order`) is the same at every effort; more effort reaches
    further down it. Quick's time is the search loop's, re-measuring and confirming the finalists come
    after; standard's is the whole call's (`run_time_s`) (docs/search.md, "Effort")."""

    QUICK = "quick"  # about a minute on a program with a 5 s compile: the likeliest wins, two finalists
    STANDARD = "standard"  # at most 5 minutes in all: every global decision, then per-op ones
    EXHAUSTIVE = "exhaustive"  # until 1000 configs are considered: the per-op decisions too, combined


# The share of `run_time_s` kept for deciding: re-timing the shortlist, the finalists side by side, and
# up to three confirmations (the leader, a rival of the other kind, the two head to head). Standard's
# decisions took 110-150 s of runs of 300-320 s in the campaign at b949c15. With 40%, two of three
# one-CPU leaders at 29ed65f (Haiku, NumPyro: 13-20 s a look, no verdict before the third) were
# cut inconclusive at the limit, NumPyro's at 1.252x [1.149, 1.320].
DECIDE_SHARE = 0.5

EFFORTS: dict[Effort, dict[str, Any]] = {
    # Quick's confirmation has one look past its setup pairs: a runtime setup's confirmation gives no
    # verdict before `setup_pairs` looks, so with as many looks as pairs it had no second chance.
    # Two finalists: on near-equal fresh figures the faster is a coin toss, and with one, a finalist
    # no faster side by side ends the run (GPT train step, docs/search.md "At commit c4d4804").
    Effort.QUICK: dict(budget=None, time_s=40.0, finalists=2, confirm_looks=3, confirm_time_s=30.0, setup_pairs=2),
    # Standard's 5 minutes are the whole call's (`run_time_s`): the search gets what the decision's
    # share leaves (`DECIDE_SHARE`), and confirmations stop at the limit.
    Effort.STANDARD: dict(budget=None, run_time_s=300.0, finalists=3, confirm_looks=4, confirm_time_s=60.0),
    Effort.EXHAUSTIVE: dict(budget=1000, time_s=None, finalists=5, confirm_looks=6, confirm_time_s=120.0),
}


@dataclass(frozen=True)
class TuneSettings:
    budget: int | None = 40  # configs considered, the default and resumed ones included
    time_s: float | None = None  # wall-clock limit of the search loop
    # Wall-clock limit of the whole call, capture to decision: the search ends `DECIDE_SHARE` of it
    # before the limit, and confirmations stop at it (a cut one is inconclusive: nothing adopted on it).
    run_time_s: float | None = None
    seed: int = 0
    allow_numerics_change: bool = False
    rtol: float | None = None
    atol: float | None = None
    options: tuple[str, ...] | None = None  # restrict the codegen stage to these XLA options
    stages: tuple[str, ...] = STAGE_ORDER  # the stages whose decisions are searched
    formulation: Formulation | str = Formulation.JOINT  # a Formulation or its name (made a Formulation)
    strategy: str = "sweep"  # a name in xtat.search.STRATEGIES
    first: tuple[Config, ...] = ()  # configs measured right after the default, before the strategy's own
    finalists: int = 3
    verify_repeats: int = 3  # checks of a would-be winner on make_inputs(1); one failure demotes it
    # Speedups whose interval reaches into [1, 1 + tie_margin] are ties: two builds of the
    # same code in one worker differ by up to ~1.5% here (code and buffer placement).
    tie_margin: float = 0.02
    impossible_speedup: float = 50.0  # a candidate this much faster than the default is not trusted
    rounds: int = 21  # interleaved rounds when re-measuring finalists
    # Confirmation (tuning.confirmation): looks of `rounds` rounds each, through the deploy path,
    # until the speedup's interval clears or falls below 1 + tie_margin, at most this many looks
    # or this long; a sample lasts at least confirm_min_sample_s (longer samples spread less).
    confirm_looks: int = 6
    confirm_time_s: float = 120.0
    confirm_min_sample_s: float = 0.05
    # A confirmation during which other processes used this many cores on average is load-dependent:
    # not adopted unless adopt_under_load.
    load_threshold_cores: float = 0.25
    adopt_under_load: bool = False
    min_sample_s: float = 0.02
    # Timing (`runner.timing.paired`): the default alone for `samples` samples; each candidate in
    # pairs with it, a short block of `samples` pairs, up to `contender_pairs` while it may still
    # beat the incumbent.
    samples: int = 5
    contender_pairs: int = 15
    # A shortlisted config is timed again (`tuning.measure.retime`): a block of `contender_pairs`
    # pairs, then on while its interval still holds 1 + tie_margin, for up to this long.
    settle_s: float = 5.0
    # Pairs of processes a process setup's effect is measured over, in the search and side by side
    # (`runner.process.ProcessRunner.setup_factor`), and more, up to twice as many, while the
    # standard error of their mean log ratio exceeds `setup_error` (`runner.timing.setup_decided`).
    setup_pairs: int = 3
    setup_error: float = 0.025
    deadline_factor: float = 10.0  # deadlines are this multiple of the default's times
    min_deadline_s: float = 30.0
    startup_deadline_s: float = 180.0
    # Racing (runner.timing.Race): stop timing a candidate once the largest of >= race_min_samples
    # paired speedups x (1 + race_margin) is below the incumbent's speedup. None: the whole short block.
    race_margin: float | None = 0.05
    race_min_samples: int = 3
    objectives: tuple[Objective | str, ...] = (Objective.TIME,)  # with more, the result carries their Pareto front
    # Other stores whose workloads' timed configs a strategy that learns across workloads
    # (`uses_prior`: model) also trains on, as it does on this store's other workloads.
    learn_from: tuple[str, ...] = ()
    # Where candidates are measured: "local" (worker processes on this machine) or "ray" / "ray:ADDRESS"
    # (workers on a Ray cluster, `runner.ray`), and by how many workers at once.
    executor: Executor | str = Executor()  # an Executor, or its text (`--executor`), made an Executor
    workers: int = 1
    # Local compile slots (`runner.process.ProcessRunner.slots`): candidates compiled side by side, never
    # while one is timed. With more than one, the strategy is asked ahead of results, so a resumed run
    # may ask other configs than the interrupted one would have: one by default (`--compile-slots`).
    compile_slots: int = 1
    # A trial claimed in the store is this tuner's for this long unless its heartbeat renews it.
    lease_s: float = 60.0

    def __post_init__(self) -> None:
        if self.budget is not None and self.budget < 1:
            raise UserError("--budget must be at least 1")
        if self.time_s is not None and self.time_s <= 0:
            raise UserError("--time must be positive")
        if self.run_time_s is not None and self.run_time_s <= 0:
            raise UserError("run_time_s must be positive")
        if (self.rtol is not None or self.atol is not None) and not self.allow_numerics_change:
            raise UserError("--rtol/--atol set the tolerance for --allow-numerics-change; pass that flag too")
        if self.allow_numerics_change and self.rtol is None and self.atol is None:
            raise UserError("--allow-numerics-change needs a tolerance: pass --rtol and/or --atol")
        if self.settle_s < 0:
            raise UserError("settle_s must not be negative")
        if self.samples < 3 or self.rounds < 3:
            raise UserError("samples and rounds must be at least 3")
        if self.setup_pairs < 1:
            raise UserError("setup_pairs must be at least 1")
        if not self.setup_error >= 0:
            raise UserError("setup_error must be 0 (a fixed count of pairs) or more")
        if self.confirm_looks < 1 or self.confirm_time_s <= 0:
            raise UserError("--confirm-time must be positive and confirm_looks at least 1")
        unknown = [s for s in self.stages if s not in STAGE_ORDER]
        if unknown or not self.stages:
            raise UserError(f"--stages {list(self.stages)}: choose one or more of {', '.join(STAGE_ORDER)}")
        from xtat.search import STRATEGIES

        if self.strategy not in STRATEGIES:
            raise UserError(f"--strategy {self.strategy!r}: choose one of {', '.join(STRATEGIES)}")
        if self.formulation not in FORMULATIONS:
            raise UserError(f"--formulation {self.formulation!r}: choose one of {', '.join(FORMULATIONS)}")
        object.__setattr__(self, "formulation", Formulation(self.formulation))
        if not self.objectives or self.objectives[0] != Objective.TIME or \
                any(o not in OBJECTIVES for o in self.objectives) or len(set(self.objectives)) < len(self.objectives):
            raise UserError(f"--objectives {','.join(self.objectives)}: start with time, then any of "
                            f"{', '.join(OBJECTIVES[1:])} (adoption is always on run time)")
        object.__setattr__(self, "objectives", tuple(Objective(o) for o in self.objectives))
        if self.race_min_samples < 3 or (self.race_margin is not None and self.race_margin < 0):
            raise UserError("racing needs race_min_samples >= 3 and race_margin >= 0 (or None to turn it off)")

        if self.workers < 1:
            raise UserError("--workers must be at least 1")
        if isinstance(self.executor, str):
            object.__setattr__(self, "executor", Executor.parse(self.executor))
        if self.measured_by.kind is ExecutorKind.LOCAL and self.workers > 1:
            raise UserError("--workers above 1 needs --executor ray: one machine times one candidate at a time")
        if self.compile_slots < 1:
            raise UserError("--compile-slots must be at least 1")
        if self.lease_s <= 0:
            raise UserError("lease_s must be positive")

    @property
    def measured_by(self) -> Executor:
        """The executor, as the Executor `__post_init__` made it."""
        assert isinstance(self.executor, Executor)
        return self.executor

    @classmethod
    def at(cls, effort: Effort | str, **overrides: Any) -> TuneSettings:
        """The settings of an effort level, with `overrides` (other TuneSettings fields) on top."""
        try:
            preset = EFFORTS[Effort(effort)]
        except ValueError:
            raise UserError(f"--effort {effort!r}: choose one of {', '.join(e.value for e in Effort)}") from None
        if "time_s" in overrides or "budget" in overrides:
            # An asked search size replaces the effort's whole-run limit: `--effort standard --budget
            # 1000` means the 1000 configs, not 5 minutes of them.
            preset = {**preset, "run_time_s": None}
        return cls(**{**preset, **overrides})  # any field; __post_init__ validates them

    @property
    def timing(self) -> TimingPolicy:
        return TimingPolicy(min_sample_s=self.min_sample_s, samples=self.samples,
                            contender_pairs=self.contender_pairs, setup_pairs=self.setup_pairs,
                            setup_error=self.setup_error, seed=self.seed)

    @property
    def tolerance(self) -> Tolerance:
        return Tolerance(self.rtol, self.atol)
