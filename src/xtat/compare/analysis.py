"""What a comparison campaign found, computed from plain recorded histories.

Nothing here runs or measures anything: every function takes the histories
that `xtat.tune` returned (`TuneResult.history`, `TrialEvent`s) and the results'
final speedups, so the numbers behind `xtat compare` can be checked on
synthetic histories.

Definitions (also in docs/compare.md):
- a run's incumbent after trial i = its fastest verified config among trials
  1..i by search timing (what it would return if stopped there);
- best-so-far speedup after trial i = the incumbent's speedup re-measured side
  by side with every other run's incumbents and the default after the runs
  (`compare.remeasure`), when that was done; otherwise, from search timing,
  the workload's reference time / the
  fastest verified median among trials 1..i of that run, where the reference
  is the median over the workload's runs of their default measurements (each
  run measures its own default; against a common reference, a default
  measured in a slow or quick spell does not scale one run's whole curve, so
  the curves compare the times the strategies found);
- a workload's best speedup = the largest best-so-far speedup that any run on
  it reached; its target = `TARGET_FRACTION` of that;
- trials (wall time) to target = the first trial (sum of `spent_s` up to and
  including it) whose best-so-far speedup is at least the target;
- a median over seeds counts "not reached" as later than any number, so it
  is "not reached" when at least half the seeds did not reach the target.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from xtat.core.space import config_key
from xtat.tuning.result import TrialEvent

TARGET_FRACTION = 0.95
REFERENCE = "random"  # what the contenders' trials-to-target are divided by
CONTENDERS = ("evolution", "model", "tpe")  # the "best of evolution/model/tpe"
BASELINE = "optuna-options"  # Optuna TPE over XLA options only: the hand-written baseline


@dataclass(frozen=True)
class Point:
    """One step of a run's convergence curve."""

    trials: int  # configs considered so far, the default (trial 1) included
    wall_s: float  # sum of the trials' spent_s so far (compile, verify and time)
    speedup: float  # best-so-far speedup: over the run's own default, or a common reference once rebased


@dataclass(frozen=True)
class RunRecord:
    """One (workload, strategy, seed) run, reduced to what the comparison needs."""

    workload: str
    strategy: str
    seed: int
    curve: tuple[Point, ...]
    final_speedup: float  # the result's speedup: finalists re-measured interleaved with the default
    final_speedup_ci: tuple[float, float]
    adopted: bool
    wall_s: float  # the whole tune call, finalists' re-measurement included
    default_s: float  # the run's search-timing median of the default (its curve's numerator)
    incumbents: tuple[str, ...] = ()  # the key of the run's incumbent after each trial ("{}": the default)

    @property
    def best_found(self) -> float:
        return self.curve[-1].speedup


@dataclass(frozen=True)
class StrategySummary:
    strategy: str
    seeds: int
    reached: int  # seeds whose run reached the workload's target
    trials_to_target: float | None  # median over seeds; None: not reached
    wall_to_target_s: float | None  # median over seeds; None: not reached
    final_speedup: float  # median over seeds
    final_speedup_range: tuple[float, float]  # min and max over seeds
    adopted: int  # seeds whose best config was adopted
    best_found: float  # median over seeds of the best-so-far speedup after the last trial
    by_trials: tuple[tuple[int, float], ...]  # median best-so-far speedup after each trial
    by_wall: tuple[tuple[float, float], ...]  # median best-so-far speedup against wall time


@dataclass(frozen=True)
class WorkloadSummary:
    workload: str
    reference_s: float  # the median of the runs' default medians: every search-timing curve's numerator
    remeasured: bool  # curves from the incumbents' side-by-side re-measurement, not from search timing
    best_speedup: float  # the largest best-so-far speedup any run on this workload reached at any trial
    best_by: str  # the strategy whose run found it
    target: float  # TARGET_FRACTION * best_speedup
    strategies: tuple[StrategySummary, ...]

    def strategy(self, name: str) -> StrategySummary | None:
        return next((s for s in self.strategies if s.strategy == name), None)


@dataclass(frozen=True)
class CampaignSummary:
    """The issue's two claims, over workloads."""

    contenders: tuple[str, ...]  # the CONTENDERS that were run
    # Per workload: (trials to target of the best contender) / (those of random); not reached
    # counts as the run's budget + 1 trials (censored); None when neither reached the target.
    trials_ratio: dict[str, float | None]
    median_trials_ratio: float | None
    # Per workload: (final speedup of the best contender) / (that of the baseline).
    speedup_vs_baseline: dict[str, float | None]
    median_speedup_vs_baseline: float | None
    beats_baseline: bool | None  # the median above is above 1
    notes: tuple[str, ...]  # what could not be computed, and why


@dataclass(frozen=True)
class CampaignAnalysis:
    budget: int
    reference_budget: int  # the budget of REFERENCE's runs: `budget` unless it was given more
    target_fraction: float
    workloads: tuple[WorkloadSummary, ...]
    summary: CampaignSummary


def convergence(history: Sequence[TrialEvent]) -> tuple[Point, ...]:
    """A run's best-so-far speedup after each trial, from its recorded history; the first event must
    be the default config, as the tuner orders it."""
    first = history[0] if history else None
    if first is None or first.config or not first.status.measured or not first.median_s:
        raise ValueError("a history starts with the measured default config ({})")
    default_s = first.median_s
    best_s, wall_s, points = math.inf, 0.0, []
    for trials, event in enumerate(history, start=1):
        wall_s += event.spent_s
        if event.status.measured and event.median_s:
            best_s = min(best_s, event.median_s)
        points.append(Point(trials, wall_s, default_s / best_s))
    return tuple(points)


def incumbents(history: Sequence[TrialEvent]) -> tuple[str, ...]:
    """The key of the run's incumbent (fastest verified config so far) after each trial."""
    best_s, best_key, keys = math.inf, config_key({}), []
    for event in history:
        if event.status.measured and event.median_s and event.median_s < best_s:
            best_s, best_key = event.median_s, config_key(event.config)
        keys.append(best_key)
    return tuple(keys)


def with_remeasured(run: RunRecord, speedups: Mapping[str, float]) -> RunRecord:
    """The run with its curve's speedups those of its incumbents as re-measured; an incumbent
    that did not rebuild keeps the value before it."""
    value, points = 1.0, []
    for point, key in zip(run.curve, run.incumbents, strict=True):
        value = 1.0 if key == config_key({}) else speedups.get(key, value)
        points.append(replace(point, speedup=value))
    return replace(run, curve=tuple(points))


def rebased(run: RunRecord, reference_s: float) -> RunRecord:
    """The run with its curve's speedups relative to `reference_s` instead of its own default."""
    factor = reference_s / run.default_s
    return replace(run, default_s=reference_s,
                   curve=tuple(replace(p, speedup=p.speedup * factor) for p in run.curve))


def first_reaching(curve: Sequence[Point], target: float) -> Point | None:
    """The first point whose best-so-far speedup is at least `target` (None: never)."""
    return next((p for p in curve if p.speedup >= target), None)


def median_not_reached_last(values: Iterable[float | None]) -> float | None:
    """Median where None ("not reached") is later than any number; None if the median is."""
    middle = statistics.median(math.inf if v is None else v for v in values)
    return None if math.isinf(middle) else middle


def median_by_trials(curves: Sequence[Sequence[Point]]) -> tuple[tuple[int, float], ...]:
    """Median over runs of the best-so-far speedup after each trial; a run that ended
    early (its strategy ran out of configs) keeps its last value."""
    longest = max(len(c) for c in curves)
    return tuple((i + 1, statistics.median(c[min(i, len(c) - 1)].speedup for c in curves))
                 for i in range(longest))


def median_by_wall(curves: Sequence[Sequence[Point]]) -> tuple[tuple[float, float], ...]:
    """Median over runs of the best-so-far speedup against wall time, at every time a
    run improved or ended a trial, from when every run has its default measured."""
    start = max(c[0].wall_s for c in curves)
    times = sorted({p.wall_s for c in curves for p in c if p.wall_s >= start})
    return tuple((t, statistics.median(_value_at(c, t) for c in curves)) for t in times)


def _value_at(curve: Sequence[Point], wall_s: float) -> float:
    return [p for p in curve if p.wall_s <= wall_s][-1].speedup


def summarize_strategy(strategy: str, runs: Sequence[RunRecord], target: float) -> StrategySummary:
    reaching = [first_reaching(r.curve, target) for r in runs]
    finals = [r.final_speedup for r in runs]
    curves = [r.curve for r in runs]
    return StrategySummary(
        strategy=strategy, seeds=len(runs), reached=sum(p is not None for p in reaching),
        trials_to_target=median_not_reached_last(None if p is None else p.trials for p in reaching),
        wall_to_target_s=median_not_reached_last(None if p is None else p.wall_s for p in reaching),
        final_speedup=statistics.median(finals), final_speedup_range=(min(finals), max(finals)),
        adopted=sum(r.adopted for r in runs), best_found=statistics.median(r.best_found for r in runs),
        by_trials=median_by_trials(curves), by_wall=median_by_wall(curves),
    )


def summarize_workload(workload: str, runs: Sequence[RunRecord], remeasured: bool = False) -> WorkloadSummary:
    """`runs` on one reference already, rebased or re-measured (see `analyze`)."""
    # The largest speedup any run reached at any trial: re-measured curves need not rise
    # monotonically (search timing may replace an incumbent by one that re-measures slower).
    best = max(runs, key=lambda r: max(p.speedup for p in r.curve))
    best_speedup = max(p.speedup for p in best.curve)
    target = TARGET_FRACTION * best_speedup
    strategies = list(dict.fromkeys(r.strategy for r in runs))  # in the order they were run
    return WorkloadSummary(
        workload=workload, reference_s=statistics.median(r.default_s for r in runs), remeasured=remeasured,
        best_speedup=best_speedup, best_by=best.strategy, target=target,
        strategies=tuple(summarize_strategy(s, [r for r in runs if r.strategy == s], target) for s in strategies),
    )


def censored_trials_to_target(runs: Sequence[RunRecord], target: float, budget: int) -> float:
    """Median over seeds of the trials to target, a run that did not reach it counting as
    budget + 1: a lower bound of its true count, so a ratio with it in the denominator
    is an upper bound."""
    counts = []
    for run in runs:
        point = first_reaching(run.curve, target)
        counts.append(budget + 1 if point is None else point.trials)
    return statistics.median(counts)


def summarize_campaign(workloads: Sequence[WorkloadSummary], runs: Sequence[RunRecord],
                       budget: int, reference_budget: int) -> CampaignSummary:
    ran = {r.strategy for r in runs}
    contenders = tuple(c for c in CONTENDERS if c in ran)
    notes: list[str] = []
    trials_ratio: dict[str, float | None] = {}
    speedup_ratio: dict[str, float | None] = {}
    if not contenders:
        notes.append(f"no contender ran ({', '.join(CONTENDERS)}): no ratio and no baseline comparison")
    if REFERENCE not in ran:
        notes.append(f"{REFERENCE!r} did not run: no trials ratio")
    if BASELINE not in ran:
        notes.append(f"{BASELINE!r} did not run: no baseline comparison")
    for w in workloads:
        mine = [r for r in runs if r.workload == w.workload]
        if contenders and REFERENCE in ran:
            best = min(censored_trials_to_target([r for r in mine if r.strategy == c], w.target, budget)
                       for c in contenders)
            reference = censored_trials_to_target([r for r in mine if r.strategy == REFERENCE], w.target,
                                                  reference_budget)
            both_censored = best > budget and reference > reference_budget
            trials_ratio[w.workload] = None if both_censored else best / reference
            if both_censored:
                notes.append(f"{w.workload}: neither the contenders nor {REFERENCE} reached the target; "
                             "left out of the trials ratio")
        baseline = w.strategy(BASELINE)
        if contenders and baseline is not None:
            best_final = max(s.final_speedup for c in contenders if (s := w.strategy(c)) is not None)
            speedup_ratio[w.workload] = best_final / baseline.final_speedup
    ratios = [v for v in trials_ratio.values() if v is not None]
    versus = [v for v in speedup_ratio.values() if v is not None]
    median_versus = statistics.median(versus) if versus else None
    return CampaignSummary(
        contenders=contenders, trials_ratio=trials_ratio,
        median_trials_ratio=statistics.median(ratios) if ratios else None,
        speedup_vs_baseline=speedup_ratio, median_speedup_vs_baseline=median_versus,
        beats_baseline=None if median_versus is None else median_versus > 1.0, notes=tuple(notes),
    )


def analyze(runs: Sequence[RunRecord], budget: int,
            remeasured: Mapping[str, Mapping[str, float]] | None = None,
            reference_budget: int | None = None) -> CampaignAnalysis:
    """Every table and curve of a campaign, from its runs and, per workload where it was done,
    the re-measured speedups of its incumbents by config key. `reference_budget`: the budget of
    REFERENCE's runs when it was larger than the others' (its trials to target are then
    censored later, so the trials ratio bounds the true ratio more tightly)."""
    reference_budget = budget if reference_budget is None else reference_budget
    remeasured = remeasured or {}
    if not runs:
        raise ValueError("no runs to analyze")
    names = list(dict.fromkeys(r.workload for r in runs))
    common: list[RunRecord] = []
    for name in names:
        mine = [r for r in runs if r.workload == name]
        if name in remeasured:
            common += [with_remeasured(r, remeasured[name]) for r in mine]
        else:
            reference_s = statistics.median(r.default_s for r in mine)
            common += [rebased(r, reference_s) for r in mine]
    workloads = tuple(summarize_workload(n, [r for r in common if r.workload == n], n in remeasured)
                      for n in names)
    return CampaignAnalysis(budget=budget, reference_budget=reference_budget, target_fraction=TARGET_FRACTION,
                            workloads=workloads,
                            summary=summarize_campaign(workloads, common, budget, reference_budget))
