"""The minimal strategy: default, then one decision at a time, then random.

Deterministic for a seed, so a resumed run asks for the same configs in the
same order and finds them already recorded.
"""

from __future__ import annotations

import random

from xtat.space.space import Config, Space, config_key


class SweepThenRandom:
    def __init__(self, space: Space, seed: int = 0, max_random_tries: int = 1000):
        self.space = space
        self.rng = random.Random(seed)
        self.max_random_tries = max_random_tries
        self._asked: set[str] = set()
        self._sweep = self._one_at_a_time()

    def _one_at_a_time(self):
        yield {}
        for decision in self.space.decisions:
            for value in decision.values:
                if value != decision.default:
                    yield {decision.stage: {decision.id: value}}

    def _random(self) -> Config:
        config: Config = {}
        for decision in self.space.decisions:
            # Keep half the decisions at default: XLA defaults are usually good,
            # and configs near them compile and verify more often.
            if self.rng.random() < 0.5:
                value = self.rng.choice(decision.values)
                if value != decision.default:
                    config.setdefault(decision.stage, {})[decision.id] = value
        return config

    def ask(self) -> Config | None:
        for config in self._sweep:
            key = config_key(config)
            if key not in self._asked:
                self._asked.add(key)
                return config
        for _ in range(self.max_random_tries):
            config = self.space.canonical(self._random())
            key = config_key(config)
            if key not in self._asked:
                self._asked.add(key)
                return config
        return None  # the space is exhausted

    def tell(self, config: Config, seconds: float | None) -> None:
        pass  # a sweep does not adapt; adaptive strategies use this
