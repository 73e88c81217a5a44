"""`model`: the learned cost model (boosted trees, `model.cost_model`) ranks many proposals;
only the best few are measured.

It trains on this search's timed configs and, given a `Prior`, on the timed
configs of every other workload in the store (joined through workload
features), so a search on a new workload starts from what the others taught.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from xtat.core.space import Config, Decision
from xtat.model.cost_model import CostModel, Prior
from xtat.model.features import decision_features
from xtat.search.surrogate import SurrogateSearch


class CostModelSurrogate:
    """Boosted trees on decision (and, with a prior, workload) features; the lowest predicted
    time scores highest."""

    def __init__(self, seed: int, prior: Prior | None = None):
        self.seed, self.prior = seed, prior
        self.model: CostModel | None = None

    def _features(self, config: Config) -> dict[str, float]:
        return {**decision_features(config), **(self.prior.workload if self.prior else {})}

    def fit(self, configs: list[Config], log_times: np.ndarray) -> None:
        features = [self._features(c) for c in configs]
        targets = list(log_times)
        if self.prior is not None:  # this workload's times on the others' scale: relative to its default
            targets = [t - float(np.log(self.prior.default_s)) for t in targets]
            features += [e.features for e in self.prior.examples]
            targets += [e.log_ratio for e in self.prior.examples]
        self.model = CostModel(self.seed).fit(features, targets)

    def score(self, configs: list[Config], best_log_time: float) -> np.ndarray:
        assert self.model is not None, "score() before fit()"
        return -self.model.predict([self._features(c) for c in configs])


class ModelSearch(SurrogateSearch):
    uses_prior = True

    def __init__(self, decisions: list[Decision], *, prior: Prior | None = None, **kwargs: Any) -> None:
        self.prior = prior  # read by _make_surrogate, which the base's __init__ calls
        super().__init__(decisions, **kwargs)

    def _make_surrogate(self) -> CostModelSurrogate:
        return CostModelSurrogate(self.seed, self.prior)

    def _training_size(self, timed: int) -> int:
        return timed + (len(self.prior.examples) if self.prior else 0)
