"""The search loop (ask a strategy, measure or resume, tell) and the XTAT-M formulations
that decide which stages' decisions it searches, around which base config."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xtat.errors import UserError
from xtat.model.cost_model import prior
from xtat.search import make_strategy
from xtat.space.space import Config, Decision, Space, config_key
from xtat.stages.base import Context, concretize
from xtat.store.base import Storage
from xtat.store.sqlite import Trial
from xtat.tuning.context import RunContext
from xtat.tuning.measure import measure
from xtat.tuning.result import TrialEvent
from xtat.tuning.settings import Formulation, TuneSettings


class SearchLoop:
    """The search loop shared by every formulation: ask, measure or resume, tell, count."""

    def __init__(self, run: RunContext, on_trial: Callable[[TrialEvent], None] | None,
                 learn_from: Sequence[Storage] = ()):
        self.context = run
        self.store, self.runner, self.settings, self.stages = run.store, run.runner, run.settings, run.stages
        self.workload_id, self.on_trial = run.workload_id, on_trial
        self.learn_from = learn_from  # other stores a strategy that learns across workloads trains on
        self.space = Space(())
        self.considered = self.new_trials = 0
        self.used_s = 0.0  # time spent on the trials considered so far, resumed ones included
        self.worker_s = 0.0
        self.best_s: float | None = None
        self.keys: set[str] = set()  # configs considered in this run
        self.history: list[TrialEvent] = []
        self.no_ops: list[str] = []
        self.inactive: dict[str, list[str]] = {}  # requirement -> decisions that could not be active

    def exhausted(self) -> bool:
        s = self.settings
        return (s.budget is not None and self.considered >= s.budget) or (
            s.time_s is not None and self.used_s >= s.time_s)

    def run(self, decisions: list[Decision], base: Config, budget: int | None) -> None:
        """Search `decisions` around `base` for at most `budget` configs (None: until exhausted)."""
        self.space = self.space.extended(decisions)
        known = self.space.by_key()
        # A strategy that learns across workloads (`uses_prior`) also trains on the store's others
        # and on those of the --learn-from stores.
        strategy = make_strategy(self.settings.strategy, decisions, seed=self.settings.seed, base=base,
                                 canonical=self.space.canonical, searchable=lambda stage, id: (stage, id) in known,
                                 budget=self.settings.budget,
                                 prior=lambda: prior(self.store, self.workload_id, self.learn_from))
        for decision in strategy.inactive:
            needs = ", ".join(f"{st}.{i}={v}" for st, i, v in decision.requires)
            self.inactive.setdefault(needs, []).append(f"{decision.stage}.{decision.id}")
        first_with: dict[str, Config] = {}  # executable hash -> the first config that built it
        start = self.considered
        while not self.exhausted() and (budget is None or self.considered - start < budget):
            config = strategy.ask()
            if config is None:
                break
            trial = self.consider(config)
            ok = trial.status.measured and trial.median_s is not None
            same_as = first_with.setdefault(trial.exe_hash, config) if trial.exe_hash else None
            strategy.tell(config, trial.median_s if ok else None, same_as=same_as if same_as != config else None)
        self.no_ops.extend(n for n in strategy.no_ops if n not in self.no_ops)

    def consider(self, config: Config) -> Trial:
        key = config_key(config)
        recorded = self.store.trial(self.workload_id, key)
        if key in self.keys and recorded is not None:
            return recorded  # already considered in this run (a later stage's base): not counted again
        resumed = recorded is not None and recorded.status != "running"
        if resumed:
            trial = recorded
        else:
            candidate = concretize(self.stages, config)
            trial, spent = measure(self.context, config, candidate, key)
            self.worker_s += spent
            self.new_trials += 1
        assert trial is not None
        self.considered += 1
        self.keys.add(key)
        self.used_s += trial.spent_s or 0.0
        if not config:
            if trial.status != "ok":
                raise UserError(f"the workload fails under the default compile: {trial.status}: {trial.error}")
            self.runner.set_deadlines(trial.compile_s or 1.0,
                                       max((trial.worker_s or 0) - (trial.compile_s or 0), 0.1))
        if trial.status.measured and trial.median_s is not None:
            self.best_s = trial.median_s if self.best_s is None else min(self.best_s, trial.median_s)
        event = TrialEvent(self.considered, config, trial.status, trial.median_s, self.best_s, resumed,
                           trial.spent_s or 0.0)
        self.history.append(event)
        if self.on_trial:
            self.on_trial(event)
        return trial

    def best_config(self) -> Config:
        """The fastest verified config considered in this run."""
        trials = [t for t in self.store.trials(self.workload_id)
                  if t.config_key in self.keys and t.status.measured and t.median_s is not None]
        return min(trials, key=lambda t: t.median_s).config if trials else {}  # type: ignore[arg-type, return-value]


def formulate(search: SearchLoop, stages: list, context: Context, settings: TuneSettings) -> None:
    """The XTAT-M formulations: how the stages' spaces are derived and searched."""
    if settings.formulation is Formulation.JOINT:
        # One space over every stage, each derived on the default program.
        decisions: list[Decision] = []
        for stage in stages:
            decisions += stage.discover(context, {}, decisions)
        search.run(decisions, {}, None)
        return
    frozen: Config = {}
    rounds = 1 if settings.formulation is Formulation.STAGED else 1_000
    for _ in range(rounds):
        before = frozen
        for index, stage in enumerate(stages):
            if search.exhausted():
                return
            # Each stage's space is derived on the program the frozen decisions produce.
            decisions = stage.discover(context, frozen, list(search.space.decisions))
            left = None if settings.budget is None else settings.budget - search.considered
            share = None if left is None else max(1, left // (len(stages) - index))
            if settings.formulation is Formulation.ALTERNATING and settings.budget is not None:
                share = max(2, min(share or 2, settings.budget // (2 * len(stages))))
            search.run(decisions, frozen, share)
            frozen = search.best_config()
        if settings.formulation is Formulation.ALTERNATING and frozen == before:
            return  # a whole round without improvement
