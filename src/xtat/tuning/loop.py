"""The search loop (ask a strategy, measure or resume, tell) and the XTAT-M formulations
that decide which stages' decisions it searches, around which base config."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xtat.core.candidate import Candidate
    from xtat.search.strategy import Strategy

import queue
import time
from collections.abc import Callable, Sequence
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from xtat.core.errors import UserError
from xtat.core.space import Config, Decision, Space, config_key
from xtat.model.cost_model import prior
from xtat.runner.base import Runner
from xtat.search import make_strategy
from xtat.search.order import counted, ordered, shipped
from xtat.stages.base import Context, concretize
from xtat.store.base import Storage
from xtat.store.records import Trial
from xtat.tuning.context import RunContext
from xtat.tuning.measure import Spent, measure, search_speedup
from xtat.tuning.result import TrialEvent
from xtat.tuning.settings import Formulation, TuneSettings

POLL_S = 0.25  # how often a config another tuner measures is looked up while waiting for it


class SearchLoop:
    """The search loop shared by every formulation: ask, measure or resume, tell, count.

    Configs are measured by the run's slots (`Runner.slots`: one for a local runner, one per
    worker for a cluster), several at once when there are several: the strategy is asked for
    more while others are pending (`search.base`: a pending config is never asked again). A
    config that another tuner of the same study has claimed is not measured here: its result is
    awaited, and the config re-claimed if that tuner's lease runs out."""

    def __init__(self, run: RunContext, on_trial: Callable[[TrialEvent], None] | None,
                 learn_from: Sequence[Storage] = ()):
        self.context = run
        self.store, self.runner, self.settings, self.stages = run.store, run.runner, run.settings, run.stages
        self.workload_id, self.on_trial = run.workload_id, on_trial
        self.learn_from = learn_from  # other stores a strategy that learns across workloads trains on
        self.space = Space(())
        self.considered = self.new_trials = 0
        self.resumed_s = 0.0  # the recorded time of the resumed trials considered
        self._started = time.perf_counter()
        self.compile_s = 0.0  # compiling new trials, summed over the slots (they compile side by side)
        self.timing_s = 0.0  # verifying and timing new trials (one at a time)
        self.best_s: float | None = None
        self.default: Trial | None = None  # the default's trial, once recorded
        self.keys: set[str] = set()  # configs considered in this run
        self.history: list[TrialEvent] = []
        self.no_ops: list[str] = []
        self.inactive: dict[str, list[str]] = {}  # requirement -> decisions that could not be active
        self.slots = list(self.runner.slots())
        self._free: queue.SimpleQueue[Runner] = queue.SimpleQueue()
        for slot in self.slots:
            self._free.put(slot)
        self._pool = ThreadPoolExecutor(len(self.slots), thread_name_prefix="xtat-slot")

    def abandon(self) -> None:
        """Stop without waiting for the slots (Ctrl-C, SIGTERM, an error): what they measure now is
        not recorded (`measure`), and their workers end with the runner's close, which follows."""
        self.context.abandoned.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        if not self.context.abandoned.is_set():
            self._pool.shutdown(wait=True)

    @property
    def used_s(self) -> float:
        """What the --time budget counts: this run's wall time so far (its slots measure side by side),
        and the recorded time of the trials it resumed, so a resumed run stops where the whole would have."""
        return self.resumed_s + time.perf_counter() - self._started

    def exhausted(self, pending: int = 0) -> bool:
        s = self.settings
        return (s.budget is not None and self.considered + pending >= s.budget) or self.out_of_time()

    def out_of_time(self) -> bool:
        until = self.context.search_until
        return ((self.settings.time_s is not None and self.used_s >= self.settings.time_s)
                or (until is not None and time.monotonic() >= until))

    def run(self, decisions: list[Decision], base: Config, budget: int | None) -> None:
        """Search `decisions` around `base` for at most `budget` configs (None: until exhausted)."""
        self.space = self.space.extended(decisions)
        known = self.space.by_key()
        # Expected gain first: global decisions before per-op ones, each by how often its kind won.
        captured = self.context.captured
        decisions = ordered(decisions, shipped(captured.fingerprint, captured.name)
                            + counted([self.store, *self.learn_from], excluding=captured.fingerprint))
        # A strategy that learns across workloads (`uses_prior`) also trains on the store's others
        # and on those of the --learn-from stores.
        strategy = make_strategy(self.settings.strategy, decisions, seed=self.settings.seed, base=base,
                                 canonical=self.space.canonical, searchable=lambda stage, id: (stage, id) in known,
                                 budget=self.settings.budget, first=self.settings.first,
                                 prior=lambda: prior(self.store, self.workload_id, self.learn_from))
        for decision in strategy.inactive:
            needs = ", ".join(f"{st}.{i}={v}" for st, i, v in decision.requires)
            self.inactive.setdefault(needs, []).append(f"{decision.stage}.{decision.id}")
        first_with: dict[str, Config] = {}  # executable hash -> the first config that built it
        start = self.considered
        pending = Pending()
        drained = False  # the strategy had nothing to propose until it learns more

        def within_counts(taken: int = 0) -> bool:  # the count budgets: the run's and this call's
            return (self.settings.budget is None or self.considered + taken < self.settings.budget) and (
                budget is None or self.considered + taken - start < budget)

        def room() -> bool:
            return within_counts(len(pending)) and not self.out_of_time()

        while True:
            while not drained and len(pending.running) < len(self.slots) and room():
                config = strategy.ask()
                if config is None:
                    drained = True
                    break
                trial = self.begin(config, pending)
                if trial is not None:
                    self.tell(strategy, config, trial, first_with)
            if not pending:
                break
            for config, trial in self.wait(pending):
                self.tell(strategy, config, trial, first_with)
            drained = False  # what it learnt may give the strategy more to propose
        # Out of time, not of configs: the strategy may complete what it started, one config past
        # the limit (a count budget is kept exactly).
        if self.out_of_time() and within_counts() and (config := strategy.finish()) is not None:
            self.tell(strategy, config, self.consider(config), first_with)
        self.no_ops.extend(n for n in strategy.no_ops if n not in self.no_ops)

    def tell(self, strategy: Strategy, config: Config, trial: Trial, first_with: dict[str, Config]) -> None:
        same_as = first_with.setdefault(trial.exe_hash, config) if trial.exe_hash else None
        strategy.tell(config, self.figure_s(trial), same_as=same_as if same_as != config else None,
                      spent_s=trial.spent_s)

    def figure_s(self, trial: Trial) -> float | None:
        """A measured trial's time as the search ranks it: the default's recorded time over the
        trial's paired speedup (drift between trials timed minutes apart cancels); None if unmeasured."""
        if not (trial.status.measured and trial.median_s is not None):
            return None
        if not trial.config or self.default is None or self.default.median_s is None:
            return trial.median_s
        speedup = search_speedup(trial, self.default)
        return None if not speedup else self.default.median_s / speedup

    def consider(self, config: Config) -> Trial:
        """Measure (or resume, or await) one config, alone."""
        pending = Pending()
        trial = self.begin(config, pending)
        while trial is None:
            trial = next((t for c, t in self.wait(pending) if c == config), None)
        return trial

    def begin(self, config: Config, pending: Pending) -> Trial | None:
        """A recorded result (None if there is none yet), or the config's measurement started in a
        slot, or awaited from the tuner that claimed it (both None, and left in `pending`)."""
        key = config_key(config)
        recorded = self.store.trial(self.workload_id, key)
        if key in self.keys and recorded is not None:
            return recorded  # already considered in this run (a later stage's base): not counted again
        if recorded is not None and recorded.status != "running":
            return self.record(config, recorded, resumed=True)
        if not self.claim(config, key, pending):
            pending.awaited[key] = config
        return None

    def claim(self, config: Config, key: str, pending: Pending) -> bool:
        """Claim the config and start measuring it in a free slot; False if another tuner holds it."""
        trial_id = self.store.start_trial(self.workload_id, self.context.run_id, config, key,
                                          self.context.owner, self.settings.lease_s)
        if trial_id is None:
            return False
        candidate = concretize(self.stages, config)
        future = self._pool.submit(self._measure_in_a_slot, config, candidate, key, trial_id)
        pending.running[future] = config
        return True

    def _measure_in_a_slot(self, config: Config, candidate: Candidate, key: str, trial_id: int) -> tuple[Trial, Spent]:
        slot = self._free.get()
        try:
            return measure(replace(self.context, runner=slot), config, candidate, key, trial_id)
        finally:
            self._free.put(slot)

    def wait(self, pending: Pending) -> list[tuple[Config, Trial]]:
        """Wait until at least one pending config has its result; those that have."""
        while True:
            done, _ = futures.wait(pending.running, timeout=POLL_S if pending.awaited else None,
                                   return_when=futures.FIRST_COMPLETED)
            finished = []
            for future in done:
                config = pending.running.pop(future)
                trial, spent = future.result()
                self.compile_s += spent.compile_s
                self.timing_s += spent.timing_s
                self.new_trials += 1
                finished.append((config, self.record(config, trial, resumed=False)))
            for key, config in list(pending.awaited.items()):
                recorded = self.store.trial(self.workload_id, key)
                if recorded is not None and recorded.status != "running":
                    del pending.awaited[key]
                    finished.append((config, self.record(config, recorded, resumed=True)))
                elif len(pending.running) < len(self.slots) and self.claim(config, key, pending):
                    del pending.awaited[key]  # its tuner's lease ran out: measured here now
            if finished:
                return finished

    def record(self, config: Config, trial: Trial, resumed: bool) -> Trial:
        """Count a config's result in this run and report it."""
        self.considered += 1
        self.keys.add(trial.config_key)
        if resumed:
            self.resumed_s += trial.spent_s or 0.0
        if not config:
            if trial.status != "ok":
                raise UserError(f"the workload fails under the default compile: {trial.status}: {trial.error}")
            self.default = trial
            for slot in {id(s): s for s in (self.runner, *self.slots)}.values():
                slot.set_deadlines(trial.compile_s or 1.0, max((trial.worker_s or 0) - (trial.compile_s or 0), 0.1))
        figure = self.figure_s(trial)
        if figure is not None:
            self.best_s = figure if self.best_s is None else min(self.best_s, figure)
        event = TrialEvent(self.considered, config, trial.status, figure, self.best_s, resumed, trial.spent_s or 0.0)
        self.history.append(event)
        if self.on_trial:
            self.on_trial(event)
        return trial

    def best_config(self) -> Config:
        """The fastest verified config considered in this run."""
        figures = [(figure, t.config) for t in self.store.trials(self.workload_id)
                   if t.config_key in self.keys and (figure := self.figure_s(t)) is not None]
        return min(figures, key=lambda pair: pair[0])[1] if figures else {}


@dataclass
class Pending:
    """Configs asked but without a result yet: measured in a slot, or awaited from another tuner."""

    running: dict[futures.Future, Config] = field(default_factory=dict)
    awaited: dict[str, Config] = field(default_factory=dict)  # config key -> config

    def __len__(self) -> int:
        return len(self.running) + len(self.awaited)


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
