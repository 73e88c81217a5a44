"""Configs measured side by side: each timed next to a sample of the default of its own, round by
round in a new order, in fresh workers, and reported as paired speedups with intervals.

One procedure for every decision that compares configs after the search: adoption (the
finalists), `xtat explain` (a config without each of its stages) and `xtat compare` (every
strategy's incumbents).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from xtat.core.candidate import Candidate
from xtat.core.space import Config, config_id
from xtat.runner.base import DEFAULT_ID, Deployment, Runner
from xtat.runner.timing import median_ci, speedup_ci
from xtat.stages.base import concretize
from xtat.tuning.settings import TuneSettings


@dataclass(frozen=True)
class Figures:
    """A config's times side by side with the default."""

    median_s: float
    ci_s: tuple[float, float]
    speedup: float  # the default's time / this config's, paired by round
    speedup_ci: tuple[float, float]


@dataclass(frozen=True)
class Measured:
    """One config's side-by-side result: its figures, or why it has none (it did not build)."""

    config: Config
    figures: Figures | None = None
    error: str | None = None


@dataclass(frozen=True)
class SideBySide:
    default: Figures | None  # None: the default did not build, or nothing built beside it
    configs: dict[str, Measured]  # by the caller's names
    default_failed: bool = False  # the default did not build, so nothing has a speedup
    # Each config's own samples, round by round (by the caller's names; none for one that did not build).
    rounds: dict[str, tuple[float, ...]] = field(default_factory=dict)

    def over(self, name: str, reference: str, seed: int = 0) -> tuple[float, float, float] | None:
        """`name`'s speedup over `reference`, paired by round, with its 95% interval; None where either
        has no samples. Configs with one process setup share a worker, so between them the setup's
        factor from one pair of processes to the next cancels, as it does not in their speedups over
        the default (timed in another worker)."""
        own, base = self.rounds.get(name), self.rounds.get(reference)
        if not own or not base or len(own) != len(base):
            return None
        return speedup_ci(list(base), list(own), seed=seed)


def side_by_side(runner: Runner, stages: list, configs: Mapping[str, Config],
                 settings: TuneSettings, as_called: bool = False) -> SideBySide:
    """Measure `configs` (by name), each next to the default, for `settings.rounds` rounds; with
    `as_called`, each deployed as the user's step is called (`runner.base.Deployment`). A config
    that fails to build gets an error; a worker failure while timing propagates
    (`WorkerFailure`), as the caller must decide what a failed comparison means."""
    ids = {name: config_id(config) if config else DEFAULT_ID for name, config in configs.items()}
    builds = {DEFAULT_ID: Candidate()}  # configs with one id (the same config twice) build once
    for name, config in configs.items():
        if ids[name] not in builds:
            builds[ids[name]] = concretize(stages, config)
    deploy = Deployment(settings.tolerance, as_called=True) if as_called else None
    pairs = runner.interleave(list(builds.items()), settings.rounds, settings.timing, deploy)
    if pairs is None:
        return SideBySide(None, {name: Measured(config, error="the default failed to build")
                                 for name, config in configs.items()}, default_failed=True)
    # The default's figure: every sample of it, each taken next to one of a config's.
    base = [default_s for samples in pairs.values() for default_s, _ in samples]

    def figures(reference: list[float], own: list[float]) -> Figures:
        median, low, high = median_ci(own, seed=settings.seed)
        speedup, s_low, s_high = speedup_ci(reference, own, seed=settings.seed)
        return Figures(median, (low, high), speedup, (s_low, s_high))

    def measured(config: Config, id: str) -> Measured:
        if id == DEFAULT_ID:  # the default itself, named as a config
            return Measured(config, figures(base, base)) if base else Measured(config, error="nothing built beside it")
        if id not in pairs:
            return Measured(config, error="failed to build")
        return Measured(config, figures([d for d, _ in pairs[id]], [own for _, own in pairs[id]]))

    rows = {name: measured(config, ids[name]) for name, config in configs.items()}
    rounds = {name: tuple(own for _, own in pairs[ids[name]]) for name in configs if ids[name] in pairs}
    return SideBySide(figures(base, base) if base else None, rows, rounds=rounds)
