"""Timing and its statistics: calibrated samples, median, bootstrap intervals."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

SETTLE_PAIRS_FACTOR = 10  # a settling candidate's pairs: at most this many times `contender_pairs`
SETUP_PAIRS_FACTOR = 2  # a process setup's pairs of processes: at most this many times `setup_pairs`
SETUP_SLOWER_MARGIN = 0.05  # a setup slower than the default by this much in every pair is decided (`setup_decided`)
# Rounds taken and dropped after builds are placed, before any is kept: the first calls after a
# build pay for page faults and cold caches, and in a placement the build calibrated first has sat
# idle while the others were calibrated.
WARMUP_ROUNDS = 2


@dataclass(frozen=True)
class TimingPolicy:
    min_sample_s: float = 0.02  # one sample lasts at least this long
    samples: int = 5  # samples of a build timed alone; pairs of the short block of a paired timing
    contender_pairs: int = 15  # pairs a candidate that may beat the incumbent is timed for in all
    # A candidate whose speedup's interval still holds the race's incumbent after `contender_pairs`
    # is timed on until its pairs have lasted this long (0: never), at most SETTLE_PAIRS_FACTOR
    # times `contender_pairs` pairs.
    settle_s: float = 0.0
    # Pairs of processes a process setup's effect is measured over (`runner.process`: setup factor),
    # and more while the standard error of their mean log ratio exceeds `setup_error` (0: never),
    # up to SETUP_PAIRS_FACTOR times as many (`setup_decided`).
    setup_pairs: int = 3
    setup_error: float = 0.0
    max_inner: int = 10_000
    seed: int = 0


def setup_decided(ratios: Sequence[float], policy: TimingPolicy) -> bool:
    """Whether the pairs of processes measured so far (each pair's ratio) decide a setup's factor.

    Two processes of one executable differ steadily by a few percent on most programs and by 20%
    or more on some (the BlackJAX sampler's one-CPU factor read 1.72x over 2 pairs in one run and
    1.16x over 3 in the next), so a fixed count is too few there and wasted elsewhere: after
    `policy.setup_pairs`, pairs are added while the standard error of the mean log ratio exceeds
    `policy.setup_error`, up to SETUP_PAIRS_FACTOR times `setup_pairs`. A setup that made the default
    slower in every pair, by more than SETUP_SLOWER_MARGIN, takes no more, as a raced candidate
    does (`Race`): how much slower it is decides nothing, and a pair of processes costs two process
    starts and builds (docs/search.md)."""
    count = len(ratios)
    if count < policy.setup_pairs:
        return False
    if count < 2 or policy.setup_error <= 0 or count >= SETUP_PAIRS_FACTOR * policy.setup_pairs:
        return True
    if max(ratios) * (1 + SETUP_SLOWER_MARGIN) < 1:
        return True
    return float(np.std(np.log(ratios), ddof=1)) / math.sqrt(count) <= policy.setup_error


@dataclass(frozen=True)
class Race:
    """Stop timing a candidate once it clearly cannot beat the incumbent (measurement elision).

    The candidate is timed in pairs with the reference (`paired`), so each pair's ratio is a
    speedup over the default with the machine's drift cancelled. The largest of n ratios lies
    above their true median with probability 1 - 0.5**n (a distribution-free order-statistic
    bound: 87.5% for 3 pairs, 97% for 5), so once even the largest ratio times (1 + margin) is
    below the incumbent's speedup, the candidate is slower than the incumbent. The margin
    absorbs what pairing does not cancel (code placement: ~1.5% between identical builds).
    """

    incumbent: float = 1.0  # what the incumbent is surely worth over the default (the default itself: 1)
    margin: float = 0.05
    min_samples: int = 3

    def lost(self, ratios: list[float]) -> bool:
        return len(ratios) >= self.min_samples and max(ratios) * (1.0 + self.margin) < self.incumbent


@dataclass(frozen=True)
class Paired:
    """A candidate's samples and the reference's, taken in pairs (`samples[i]` beside `reference[i]`)."""

    samples: tuple[float, ...]
    reference: tuple[float, ...]
    raced: bool  # stopped early: the race was lost

    @property
    def speedup(self) -> tuple[float, float, float]:
        """The reference's time over the candidate's, paired, with its 95% interval (`speedup_ci`)."""
        return speedup_ci(list(self.reference), list(self.samples))


def paired(candidate: Callable[[], float], reference: Callable[[], float], policy: TimingPolicy,
           race: Race | None = None, clock: Callable[[], float] = time.perf_counter) -> Paired:
    """Time `candidate` against `reference` (each a callable returning one sample) in pairs.

    The order alternates pair by pair (AB, BA, AB, ...), so neither side is systematically first,
    and each pair's two samples are adjacent in time: drift and load between candidates cancel
    in the ratio. A short block of `policy.samples` pairs first; only a contender (its speedup's
    interval still reaches the incumbent's speedup) is timed on, up to `policy.contender_pairs`,
    so the figures of the configs that may win are the tightest; one whose interval then still
    holds the incumbent is timed on while `policy.settle_s` allows (sequential: the pairs a
    candidate costs grow only where its figure is undecided). With a race, timing stops as soon
    as it is lost (`Race.lost`)."""
    # One pair first, dropped: the side that has been idle (the reference, while a candidate was
    # compiled and verified) runs slow for its first samples.
    candidate(), reference()
    started = clock()
    mine: list[float] = []
    theirs: list[float] = []
    most = max(policy.samples, policy.contender_pairs)
    bar = race.incumbent if race is not None else float("inf")
    while True:
        if len(mine) % 2 == 0:
            mine.append(candidate())
            theirs.append(reference())
        else:
            theirs.append(reference())
            mine.append(candidate())
        if race is not None and race.lost([r / c for r, c in zip(theirs, mine, strict=True)]):
            return Paired(tuple(mine), tuple(theirs), raced=True)
        if len(mine) < policy.samples:
            continue
        _, low, high = speedup_ci(theirs, mine)
        if high < bar:
            break  # not a contender: the short block is figure enough
        if len(mine) >= most and (low > bar or clock() - started >= policy.settle_s
                                  or len(mine) >= SETTLE_PAIRS_FACTOR * most):
            break
    return Paired(tuple(mine), tuple(theirs), raced=False)


def calibrate(call: Callable[[], None], policy: TimingPolicy) -> int:
    """Inner repeats so that one sample lasts at least policy.min_sample_s."""
    inner = 1
    while True:
        start = time.perf_counter()
        for _ in range(inner):
            call()
        elapsed = time.perf_counter() - start
        if elapsed >= policy.min_sample_s or inner >= policy.max_inner:
            return inner
        # Aim past the target so one more round usually suffices.
        grow = int(np.ceil(1.2 * policy.min_sample_s / max(elapsed, 1e-9) * inner))
        inner = min(policy.max_inner, max(inner * 2, grow))


def sample(call: Callable[[], None], inner: int) -> float:
    """Seconds per call, averaged over `inner` back-to-back calls."""
    start = time.perf_counter()
    for _ in range(inner):
        call()
    return (time.perf_counter() - start) / inner


def interleave(samplers: dict[str, Callable[[], float]], rounds: int, *, warmup: int = WARMUP_ROUNDS,
               seed: int = 0) -> dict[str, list[float]]:
    """One sample of each sampler per round, in a fresh random order every round, so that drift
    and load fall on all of them alike; `warmup` rounds are taken and dropped. A sampler may
    time a call here or ask another process for a sample."""
    import random

    samples: dict[str, list[float]] = {label: [] for label in samplers}
    order, rng = list(samplers), random.Random(seed)
    for _ in range(rounds + warmup):
        rng.shuffle(order)
        for label in order:
            samples[label].append(samplers[label]())
    return {label: times[warmup:] for label, times in samples.items()}


def interleaved(calls: dict[str, Callable[[], None]], rounds: int, *, warmup: int = WARMUP_ROUNDS,
                min_sample_s: float = 0.05, seed: int = 0) -> dict[str, list[float]]:
    """`interleave` of calls in this process, each sample a calibrated batch of calls."""
    inner = {label: calibrate(call, TimingPolicy(min_sample_s=min_sample_s)) for label, call in calls.items()}
    samplers: dict[str, Callable[[], float]] = {
        label: functools.partial(sample, call, inner[label]) for label, call in calls.items()}
    return interleave(samplers, rounds, warmup=warmup, seed=seed)


def median_ci(samples: list[float], seed: int = 0, confidence: float = 0.95) -> tuple[float, float, float]:
    """Median and a percentile-bootstrap interval of the median."""
    data = np.asarray(samples, dtype=float)
    median = float(np.median(data))
    if len(data) < 2:
        return median, median, median
    from scipy.stats import bootstrap

    result = bootstrap(
        (data,), np.median, confidence_level=confidence, n_resamples=2000,
        method="percentile", random_state=np.random.default_rng(seed),
    )
    low, high = result.confidence_interval
    return median, float(min(low, median)), float(max(high, median))


def speedup_ci(baseline: list[float], candidate: list[float], seed: int = 0,
               confidence: float = 0.95) -> tuple[float, float, float]:
    """Speedup of candidate over baseline from interleaved rounds, with a 95% (`confidence`) interval.

    Rounds are paired, so the ratio per round cancels slow drift of the
    machine. The interval is the exact distribution-free one for the median
    of the ratios (order statistics, scipy.stats.quantile_test), not a
    bootstrap: with ~20 rounds a percentile bootstrap is too narrow, and
    measured here it claimed a speedup between two identical builds in 9-10
    of 100 runs; adoption must not rest on that.
    """
    from scipy.stats import quantile_test

    ratios = np.asarray(baseline, dtype=float) / np.asarray(candidate, dtype=float)
    median = float(np.median(ratios))
    if len(ratios) < 2:
        return median, median, median
    interval = quantile_test(ratios, q=median, p=0.5).confidence_interval(confidence)
    low = float(interval.low) if np.isfinite(interval.low) else float(np.min(ratios))
    high = float(interval.high) if np.isfinite(interval.high) else float(np.max(ratios))
    return median, min(low, median), max(high, median)
