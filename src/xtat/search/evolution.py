"""Regularized evolution (Real et al., 2019) over decision vectors.

An aging population: each child joins it and the oldest member leaves, so a
config that was lucky once in a noisy measurement cannot dominate forever.
A parent is the fastest of a few members drawn at random (tournament); a
child is a uniform crossover of two parents (with some probability) and then
a mutation of one active decision. Conditional genes follow their parents: a
mutation only touches decisions active in the child, and a gene that the
child's other genes leave inactive is dropped. The population starts from the
base config and random samples; failed configs never join it.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from xtat.core.space import Config, Decision
from xtat.search.base import SearchStrategy


class RegularizedEvolution(SearchStrategy):
    def __init__(self, decisions: list[Decision], *, population: int = 8, tournament: int = 3,
                 crossover_rate: float = 0.5, **options: Any) -> None:
        super().__init__(decisions, **options)
        self.population_size = population
        self.tournament = tournament
        self.crossover_rate = crossover_rate
        self._population: deque[tuple[Config, float]] = deque()

    def _select(self) -> Config:
        contestants = self.rng.sample(list(self._population), min(self.tournament, len(self._population)))
        return min(contestants, key=lambda member: member[1])[0]

    def _propose(self) -> Config | None:
        if len(self._population) < self.population_size:
            return self.sample()
        parent = self._select()
        if self.rng.random() < self.crossover_rate:
            parent = self.normalize(self.crossover(parent, self._select()))
        return self.mutate(parent)

    def _observe(self, config: Config, seconds: float | None) -> None:
        if seconds is None:
            return
        self._population.append((config, seconds))
        if len(self._population) > self.population_size:
            self._population.popleft()
