"""The minimal strategy: the base config, then one decision at a time, then random.

The one-at-a-time sweep doubles as the no-op probe: a decision none of whose
values changes the executable (every sweep config came back `duplicate` of
the base) is reported in `no_ops` and left out of the random phase.
Deterministic for a seed, so a resumed run asks for the same configs in the
same order and finds them already recorded.
"""

from __future__ import annotations

import random
from typing import Callable, Iterator

from xtat.space.space import Config, Decision, config_key, is_active, merge


class SweepThenRandom:
    def __init__(self, decisions: list[Decision], seed: int = 0, base: Config | None = None,
                 canonical: Callable[[Config], Config] = lambda c: c, max_random_tries: int = 1000,
                 searchable: Callable[[str, str], bool] = lambda stage, id: True):
        # A conditional decision whose requirement is not searchable here (its stage is
        # not searched, or comes later in a staged formulation) can never be active.
        self.inactive = [d for d in decisions if not all(searchable(st, i) for st, i, _ in d.requires)]
        self.decisions = [d for d in decisions if d not in self.inactive]
        self.base = base or {}
        self.canonical = canonical
        self.rng = random.Random(seed)
        self.max_random_tries = max_random_tries
        self._asked: set[str] = set()
        self._sweep_of: dict[str, Decision] = {}  # config key -> the decision it sweeps
        self._changes: dict[tuple[str, str], bool] = {}
        self._sweep = self._one_at_a_time()
        self._sweeping = True

    def _requirements(self, decision: Decision) -> Config:
        config: Config = {}
        for stage, id, value in decision.requires:
            config.setdefault(stage, {})[id] = value
        return config

    def _one_at_a_time(self) -> Iterator[tuple[Config, Decision | None]]:
        yield self.base, None
        for decision in self.decisions:
            for value in decision.values:
                if value != decision.default:
                    single = {decision.stage: {decision.id: value}}
                    yield merge(self.base, self._requirements(decision), single), decision

    def _random(self) -> Config:
        config: Config = {}
        # Unconditional decisions first, so a conditional one sees its parents' values.
        for decision in sorted(self.active_decisions(), key=lambda d: bool(d.requires)):
            if decision.requires and not is_active(decision, merge(self.base, config)):
                continue
            # Keep half the decisions at their base value: XLA's defaults are usually good,
            # and configs near them compile and verify more often.
            if self.rng.random() < 0.5:
                config.setdefault(decision.stage, {})[decision.id] = self.rng.choice(decision.values)
        return merge(self.base, config)

    def active_decisions(self) -> list[Decision]:
        return [d for d in self.decisions if (d.stage, d.id) not in set(self.no_ops_keys())]

    def no_ops_keys(self) -> list[tuple[str, str]]:
        """Decisions whose every swept value gave the base's executable."""
        if self._sweeping:
            return []
        return [(d.stage, d.id) for d in self.decisions if self._changes.get((d.stage, d.id)) is False]

    @property
    def no_ops(self) -> list[str]:
        return [f"{stage}.{id}" for stage, id in self.no_ops_keys()]

    def ask(self) -> Config | None:
        for config, decision in self._sweep:
            config = self.canonical(config)
            key = config_key(config)
            if key not in self._asked:
                self._asked.add(key)
                if decision is not None:
                    self._sweep_of[key] = decision
                return config
        self._sweeping = False
        for _ in range(self.max_random_tries):
            config = self.canonical(self._random())
            key = config_key(config)
            if key not in self._asked:
                self._asked.add(key)
                return config
        return None  # the space is exhausted

    def tell(self, config: Config, seconds: float | None, same_as_base: bool = False) -> None:
        decision = self._sweep_of.get(config_key(config))
        if decision is not None:
            key = (decision.stage, decision.id)
            self._changes[key] = self._changes.get(key, False) or not same_as_base
