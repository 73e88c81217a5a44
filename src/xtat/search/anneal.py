"""Simulated annealing over neighbouring configs.

The state moves to a neighbour (one active decision changed) when it is
faster, or when it is slower with probability exp(-dE / T), where the energy
E is the log of the run time: a move's cost is its relative slowdown, the same
on fast and slow workloads. T cools geometrically per result, so the walk
explores early and settles late. A failed or rejected config is never moved to.
"""

from __future__ import annotations

import math
from typing import Any

from xtat.core.space import Config, Decision
from xtat.search.base import SearchStrategy


class SimulatedAnnealing(SearchStrategy):
    def __init__(self, decisions: list[Decision], *, temperature: float = 0.1, cooling: float = 0.95,
                 **options: Any) -> None:
        super().__init__(decisions, **options)
        # T = 0.1 accepts a 10% slowdown with probability 1/e at first; after 60 results
        # T is about 0.005, where a slowdown of 1% is accepted 1 time in 7.
        self.temperature = temperature
        self.cooling = cooling
        self._state: tuple[Config, float] | None = None  # config, energy

    def _propose(self) -> Config | None:
        return self.sample() if self._state is None else self.mutate(self._state[0])

    def _observe(self, config: Config, seconds: float | None) -> None:
        if seconds is not None:
            energy = math.log(seconds)
            if (self._state is None or energy <= self._state[1]
                    or self.rng.random() < math.exp((self._state[1] - energy) / self.temperature)):
                self._state = (config, energy)
        self.temperature *= self.cooling
