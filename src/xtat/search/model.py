"""`model`: the learned cost model (boosted trees, `model.cost_model`) ranks many proposals;
only the best few are measured."""

from __future__ import annotations

import numpy as np

from xtat.model.cost_model import CostModel
from xtat.model.features import decision_features
from xtat.search.surrogate import SurrogateSearch
from xtat.space.space import Config


class CostModelSurrogate:
    """Boosted trees on the configs' decision features; the lowest predicted time scores highest."""

    def __init__(self, seed: int):
        self.seed = seed
        self.model: CostModel | None = None

    def fit(self, configs: list[Config], log_times: np.ndarray) -> None:
        self.model = CostModel(self.seed).fit([decision_features(c) for c in configs], log_times)

    def score(self, configs: list[Config], best_log_time: float) -> np.ndarray:
        assert self.model is not None, "score() before fit()"
        return -self.model.predict([decision_features(c) for c in configs])


class ModelSearch(SurrogateSearch):
    def _make_surrogate(self) -> CostModelSurrogate:
        return CostModelSurrogate(self.seed)
