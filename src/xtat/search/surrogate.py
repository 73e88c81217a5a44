"""Surrogate-ranked search: many proposals, a model ranks them, only the best few are asked.

The loop shared by `model` (boosted trees, `search.model`) and `gp` (Gaussian
process with expected improvement, `search.gp`): until `min_observed` configs
have a time, proposals are random (the model has nothing to learn from);
after that, every `batch` asks the surrogate is refitted on all timed
configs, a pool of proposals is drawn (mutations of the best configs so far
plus random ones), and the `batch` best-scored unseen proposals are asked,
one per score and none scored exactly as an already timed config (while
there are others).

Proposals are ranked on decision features only, before anything is compiled:
see docs/cost-model.md for why.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import numpy as np

from xtat.core.space import Config, Decision, config_key
from xtat.search.base import SearchStrategy


class Surrogate(Protocol):
    def fit(self, configs: list[Config], log_times: np.ndarray) -> None:
        """Learn from timed configs (log seconds; failures are not shown to it)."""

    def score(self, configs: list[Config], best_log_time: float) -> np.ndarray:
        """How much each config is worth asking next: higher first."""


class SurrogateSearch(SearchStrategy):
    min_observed = 6  # timed configs before the surrogate is trusted
    pool = 256  # proposals ranked per batch
    batch = 3  # asks per refit
    elite = 5  # best configs whose mutations fill half the pool

    def __init__(self, decisions: list[Decision], **kwargs: Any) -> None:
        super().__init__(decisions, **kwargs)
        self.surrogate = self._make_surrogate()
        self.timed: dict[str, tuple[Config, float | None]] = {}  # every observed config and its seconds
        self._queue: list[Config] = []

    def _make_surrogate(self) -> Surrogate:
        """The model that ranks proposals, built once the searchable decisions are known."""
        raise NotImplementedError

    def _training_size(self, timed: int) -> int:
        """Rows the surrogate would learn from, given this search's timed configs."""
        return timed

    def _observe(self, config: Config, seconds: float | None) -> None:
        self.timed[config_key(config)] = (config, seconds)

    def _propose(self) -> Config | None:
        if not self._queue:
            self._queue = self._ranked_batch()
        return self._queue.pop(0) if self._queue else None

    def _ranked_batch(self) -> list[Config]:
        timed = [(c, s) for c, s in self.timed.values() if s is not None]
        if not timed or self._training_size(len(timed)) < self.min_observed:
            return [self.sample(keep_base=0.5)]
        log_times = np.log([s for _, s in timed])
        self.surrogate.fit([c for c, _ in timed], log_times)
        proposals = self._unseen_pool([c for c, _ in sorted(timed, key=lambda cs: cs[1])[:self.elite]])
        if not proposals:
            return []
        scores = self.surrogate.score(proposals, float(log_times.min()))
        # A proposal scored exactly as a timed config, or as another proposal of this batch, is one
        # the model cannot tell from it (trees give such configs the same leaves): mostly the same
        # executable again, a trial spent to learn nothing. So one proposal per score, and only
        # scores not already timed, while there are such.
        ranked = np.argsort(-scores, kind="stable")
        taken = set(self.surrogate.score([c for c, _ in timed], float(log_times.min())).tolist())
        chosen: list[int] = []
        for i in ranked:
            if len(chosen) < self.batch and scores[i] not in taken:
                chosen.append(i)
                taken.add(scores[i])
        return [proposals[i] for i in (chosen or ranked[:self.batch])]

    def _unseen_pool(self, elite: list[Config]) -> list[Config]:
        """Distinct canonical proposals not asked before: mutations of the elite, then random;
        those that differ from an asked config only in decisions known inert (expected to
        rebuild its executable) are left out while there are others."""
        seen = set(self.timed) | set(self.results) | self._pending
        inert = self.known_inert()
        seen_signatures = {self.signature(json.loads(key), inert) for key in seen} if inert else set()
        pool: dict[str, Config] = {}
        expected_duplicates: dict[str, Config] = {}
        for i in range(self.pool):
            if i < self.pool // 2:
                config = self.rng.choice(elite)
                for _ in range(self.rng.choice((1, 1, 2))):
                    config = self.mutate(config)
            else:
                config = self.sample(keep_base=0.5)
            config = self.normalize(config)
            key = config_key(config)
            if key in seen:
                continue
            if inert and self.signature(config, inert) in seen_signatures:
                expected_duplicates.setdefault(key, config)
            else:
                pool.setdefault(key, config)
        return list(pool.values()) or list(expected_duplicates.values())
