"""The minimal strategy: the base config, then one decision at a time, then random.

The one-at-a-time sweep is the base's no-op probe list: a decision none of
whose values changes the executable (every probe came back the same
executable as the base) is reported in `no_ops` and left out of the random
phase, which keeps each decision at its base value half of the time (XLA's
defaults are usually good, and configs near them compile and verify more often).
"""

from __future__ import annotations

from xtat.search.base import SearchStrategy
from xtat.space.space import Config, Decision


class SweepThenRandom(SearchStrategy):
    def __init__(self, decisions: list[Decision], **options):
        super().__init__(decisions, **options)
        self._sweep = iter([config for _, configs in self.probes for config in configs])

    def _propose(self) -> Config | None:
        probe = next(self._sweep, None)
        return probe if probe is not None else self.sample(keep_base=0.5)

    def _observe(self, config: Config, seconds: float | None) -> None:
        """Neither phase depends on results; the base keeps the no-op probes."""
