"""Confirmation: the winner deployed as production deploys it, in fresh processes, timed
interleaved with the default, with as many rounds as the decision needs.

Both builds go through `jax.jit(program, compiler_options=...)` and jax's own dispatch,
the path `xtat.jit` and a preset take (the worker holds the exported program, not the
user's code: the traced program is the same StableHLO). A config with runtime decisions
runs in a process started with them, the default in one started without.

The decision is a group-sequential test on the median of the per-round ratios
default/candidate (`SequentialDesign`): after each look of `rounds` rounds, adopt when the
interval's lower bound clears 1 + tie margin, stop when its upper bound falls below it,
otherwise add a look, up to `max_looks` or the time cap. Each look's interval has
confidence 1 - alpha/max_looks (Bonferroni over the looks), so when the true speedup is at
most 1 + tie margin the chance of adopting is at most alpha, however many looks are taken;
docs/confirmation.md has the measured rates.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from enum import StrEnum

from xtat.core import serial
from xtat.core.candidate import Candidate
from xtat.core.status import TrialStatus
from xtat.runner.base import DEFAULT_ID, Deployment, Runner, WorkerFailure
from xtat.runner.load import LoadMonitor, MachineLoad
from xtat.runner.timing import WARMUP_ROUNDS, median_ci, speedup_ci
from xtat.tuning.settings import TuneSettings


class Verdict(StrEnum):
    FASTER = "faster"  # the interval lies above 1 + tie margin
    NOT_FASTER = "not_faster"  # the interval lies below it: a tie or slower
    INCONCLUSIVE = "inconclusive"  # the looks or the time cap ran out first
    FAILED = "failed"  # a build or worker failed


@dataclass(frozen=True)
class SequentialDesign:
    threshold: float  # 1 + tie margin
    rounds: int = 21  # rounds per look
    max_looks: int = 6
    alpha: float = 0.05  # bound on adopting when the true speedup is at most `threshold`

    @property
    def confidence(self) -> float:
        return 1.0 - self.alpha / self.max_looks

    def look(self, baseline: list[float], candidate: list[float], looks: int
             ) -> tuple[Verdict | None, tuple[float, float, float]]:
        """The verdict after `looks` looks (None: take another), and the speedup with its interval."""
        estimate = speedup_ci(baseline, candidate, confidence=self.confidence)
        _, low, high = estimate
        if low > self.threshold:
            return Verdict.FASTER, estimate
        if high < self.threshold:
            return Verdict.NOT_FASTER, estimate
        return (Verdict.INCONCLUSIVE if looks >= self.max_looks else None), estimate

    def simulate(self, true_speedup: float, spread: float, runs: int, seed: int = 0) -> list[Verdict]:
        """Verdicts of `runs` simulated confirmations, the design's operating characteristic:
        per-round times log-normal with sd `spread` (of log time) around 1 for the default and
        1/true_speedup for the candidate, times a drift shared by both builds of a round (the
        machine's, which pairing cancels). Used by the tests and docs/confirmation.md."""
        import numpy as np

        rng = np.random.default_rng(seed)
        verdicts = []
        for _ in range(runs):
            baseline: list[float] = []
            candidate: list[float] = []
            looks, verdict = 0, None
            while verdict is None:
                drift = rng.normal(0, 0.3, self.rounds)
                baseline += list(np.exp(drift + rng.normal(0, spread, self.rounds)))
                candidate += list(np.exp(drift + rng.normal(0, spread, self.rounds)) / true_speedup)
                looks += 1
                verdict, _ = self.look(baseline, candidate, looks)
            verdicts.append(verdict)
        return verdicts


@dataclass(frozen=True)
class Confirmation:
    verdict: Verdict
    speedup: float
    speedup_ci: tuple[float, float]
    default_s: float
    default_ci_s: tuple[float, float]
    candidate_s: float
    candidate_ci_s: tuple[float, float]
    rounds: int
    looks: int
    confidence: float
    load: MachineLoad | None
    load_dependent: bool  # others used enough of the machine to explain the difference
    error: str | None = None
    # Where a worker failed while confirming: the build it was building or running (`WorkerFailure.build`:
    # the config's id, `DEFAULT_ID`, or None where not known) and how it failed (crash, timeout, oom).
    failed_build: str | None = None
    failure_status: TrialStatus | None = None
    cut_by_run_limit: bool = False  # inconclusive because the run's whole-call limit came (`run_time_s`)
    # The looks before which no verdict but an inconclusive one is given: a process setup's, as many
    # fresh pairs of processes as its factor took; 1 otherwise (records written before it: 1).
    looks_for_a_verdict: int = 1

    def to_json(self) -> dict:
        return serial.dump(self)

    @classmethod
    def from_json(cls, data: dict) -> Confirmation:
        return serial.load(cls, data)


def confirm(runner: Runner, candidate: Candidate, config_id: str, settings: TuneSettings,
            as_called: bool = False, baseline: Candidate | None = None, until: float | None = None) -> Confirmation:
    """Deploy the default and `candidate` (its config id: `config_id`) in fresh workers and test the
    speedup sequentially; `as_called`: both deployed as the user's step is called (`Deployment`).
    With `baseline`, that build stands in the default's place (head to head: the `default_*`
    figures are its own). `until`: the `time.monotonic()` instant of the run's limit: no look is
    started that the last one's time (fresh processes' deploys included) says would end past it."""
    design = SequentialDesign(1.0 + settings.tie_margin, settings.rounds, settings.confirm_looks)
    monitor = LoadMonitor(runner.pids)
    timing = replace(settings.timing, min_sample_s=max(settings.min_sample_s, settings.confirm_min_sample_s))
    # A config that sets the runtime runs in a process of its own, and one pair of processes is that
    # pair's figure (`ProcessRunner.setup_factor`): each look is in a fresh pair, and no verdict but
    # an inconclusive one comes before `setup_pairs` looks (skipping a look's test keeps the bound).
    reference = "the default" if baseline is None else "the baseline"
    baseline = baseline or Candidate()
    fresh_each_look = bool(candidate.process.runtime or baseline.process.runtime)
    looks_for_a_verdict = min(settings.setup_pairs, design.max_looks) if fresh_each_look else 1
    shuffle = random.Random(settings.seed)
    timed_s = 0.0  # the time cap counts the looks' timing, not the deploys of fresh pairs
    cut = False  # ended inconclusive by the run's limit (`until`), not by its own time cap or looks
    try:
        samples: dict[str, list[float]] = {DEFAULT_ID: [], config_id: []}
        looks, round_s = 0, 0.0
        while True:
            iteration_started = time.monotonic()
            if looks == 0 or fresh_each_look:
                placement = runner.place([(DEFAULT_ID, baseline), (config_id, candidate)], timing,
                                         Deployment(settings.tolerance, as_called))
                if placement.failed:
                    which, why = next(iter(placement.failed.items()))
                    return _failed(design, monitor, f"{reference if which == DEFAULT_ID else 'the config'} "
                                                    f"failed to deploy: {why}")
                for _ in range(WARMUP_ROUNDS):
                    placement.sample_pairs(shuffle)
            look_started = time.monotonic()
            for _ in range(design.rounds):
                default_s, config_s = placement.sample_pairs(shuffle)[config_id]
                samples[DEFAULT_ID].append(default_s)
                samples[config_id].append(config_s)
            looks += 1
            monitor.poll()
            timed_s += time.monotonic() - look_started
            round_s = (time.monotonic() - look_started) / design.rounds
            verdict, estimate = design.look(samples[DEFAULT_ID], samples[config_id], looks)
            if looks < looks_for_a_verdict and verdict is not Verdict.INCONCLUSIVE:
                verdict = None
            over_time = timed_s + design.rounds * round_s > settings.confirm_time_s
            now = time.monotonic()
            out_of_run = until is not None and now + (now - iteration_started) > until
            if verdict is None and (over_time or out_of_run):
                verdict = Verdict.INCONCLUSIVE
                cut = out_of_run and not over_time
            if verdict is not None:
                break
    except WorkerFailure as failure:
        runner.discard(candidate)
        return _failed(design, monitor, f"worker failed while confirming: {failure.status}: {failure.error}",
                       failure)
    load = monitor.report()
    median, low, high = median_ci(samples[config_id], seed=settings.seed)
    d_median, d_low, d_high = median_ci(samples[DEFAULT_ID], seed=settings.seed)
    speedup, s_low, s_high = estimate
    return Confirmation(
        verdict, speedup, (s_low, s_high), d_median, (d_low, d_high),
        median, (low, high), len(samples[DEFAULT_ID]), looks, design.confidence, load,
        load_dependent=load.other_cores is not None and load.other_cores >= settings.load_threshold_cores,
        cut_by_run_limit=cut, looks_for_a_verdict=looks_for_a_verdict)


def _failed(design: SequentialDesign, monitor: LoadMonitor, error: str,
            failure: WorkerFailure | None = None) -> Confirmation:
    return Confirmation(Verdict.FAILED, 1.0, (1.0, 1.0), 0.0, (0.0, 0.0), 0.0, (0.0, 0.0), 0, 0, design.confidence,
                        monitor.report(), False, error, failure.build if failure else None,
                        failure.status if failure else None)
