"""The default strategy: the base config, one decision at a time, the helpful ones combined, then random.

The one-at-a-time sweep is the base's no-op probe list: a decision none of
whose values changes the executable (every probe came back the same
executable as the base) is reported in `no_ops` and left out of the random
phase.

Wins of separate decisions often add up, and a budget spent on the sweep alone
never tries them together. So the sweep is followed by a greedy combination:
each decision's best value that beat the base, best first, is added to the best
combination so far, and kept when the combination got faster.

The random phase keeps each decision at its base value half of the time (XLA's
defaults are usually good, and configs near them compile and verify more often).
"""

from __future__ import annotations

from typing import Any

from xtat.core.space import Config, Decision, config_key, merge
from xtat.search.base import SearchStrategy, requirements, value_of


class SweepThenRandom(SearchStrategy):
    def __init__(self, decisions: list[Decision], **options: Any) -> None:
        super().__init__(decisions, **options)
        self._sweep = iter([config for _, configs in self.probes for config in configs])
        self._helpful: list[tuple[float, Config]] | None = None  # single changes left to combine, fastest first
        self._best: tuple[Config, float] | None = None  # the best combination so far
        self._trying: Config | None = None  # the combination asked and not yet told

    def _propose(self) -> Config | None:
        probe = next(self._sweep, None)
        if probe is not None:
            return probe
        combination = self._combine()
        return combination if combination is not None else self.sample(keep_base=0.5)

    def _observe(self, config: Config, seconds: float | None) -> None:
        if self._trying is not None and config_key(config) == config_key(self._trying):
            self._trying = None
            if seconds is not None and self._best is not None and seconds < self._best[1]:
                self._best = (config, seconds)

    def _combine(self) -> Config | None:
        """The next greedy combination to measure, or None once there is none (or one is in flight)."""
        if self._trying is not None:
            return None
        if self._helpful is None:
            self._helpful = self._helpful_changes()
            if not self._helpful:
                return None
            seconds, first = self._helpful.pop(0)  # a probe: measured already
            self._best = (self.normalize(merge(self.base, first)), seconds)
        while self._helpful:
            _, change = self._helpful.pop(0)
            assert self._best is not None
            combination = self.normalize(merge(self._best[0], change))
            if config_key(combination) not in self.results:
                self._trying = combination
                return combination
        return None

    def _helpful_changes(self) -> list[tuple[float, Config]]:
        """Per decision that is not a no-op, its fastest single change that beat the base; fastest first."""
        base_s = self.results.get(config_key(self.base))
        if base_s is None:
            return []
        best: list[tuple[float, Config]] = []
        no_ops = set(self.no_ops_keys())  # faster only by noise: the executable was the base's
        for decision, configs in self.probes:
            if (decision.stage, decision.id) in no_ops:
                continue
            timed = [(s, c) for c in configs if (s := self.results.get(config_key(c))) is not None and s < base_s]
            if timed:
                seconds, config = min(timed, key=lambda t: t[0])
                change = merge(requirements(decision), {decision.stage: {decision.id: value_of(config, decision)}})
                best.append((seconds, change))
        return sorted(best, key=lambda t: t[0])
