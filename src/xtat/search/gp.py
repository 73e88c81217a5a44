"""`gp`: Bayesian optimisation with a Gaussian process (Matern kernel on one-hot decision
encodings) and expected improvement over sampled proposals."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from xtat.core.space import Config, Decision
from xtat.search.base import value_of
from xtat.search.surrogate import SurrogateSearch


class ExpectedImprovement:
    """GP regression of log time on one-hot decisions; scores are the expected improvement
    below the best log time so far."""

    def __init__(self, decisions: list[Decision], seed: int, xi: float = 0.01):
        self.columns = [(d, v) for d in decisions for v in d.values]
        self.seed, self.xi = seed, xi
        self.gp: Any = None  # sklearn's GaussianProcessRegressor once fitted

    def _encode(self, configs: list[Config]) -> np.ndarray:
        return np.array([[float(value_of(c, d) == v) for d, v in self.columns] for c in configs])

    def fit(self, configs: list[Config], log_times: np.ndarray) -> None:
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

        # The white-noise term is the timing noise; normalize_y centres log times per fit.
        kernel = ConstantKernel(1.0) * Matern(length_scale=1.0, nu=2.5) + WhiteKernel(1e-3)
        self.gp = GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=1, random_state=self.seed)
        # One BLAS thread: the matrices are tens of rows (see model.cost_model on threads).
        with warnings.catch_warnings(), threadpool_limits(1):
            warnings.simplefilter("ignore", ConvergenceWarning)  # a bound reached on few points is expected
            self.gp.fit(self._encode(configs), log_times)

    def score(self, configs: list[Config], best_log_time: float) -> np.ndarray:
        from scipy.stats import norm

        assert self.gp is not None, "score() before fit()"
        with threadpool_limits(1):
            mean, std = self.gp.predict(self._encode(configs), return_std=True)
        std = np.maximum(std, 1e-12)
        improvement = best_log_time - mean - self.xi
        z = improvement / std
        return improvement * norm.cdf(z) + std * norm.pdf(z)


class GPSearch(SurrogateSearch):
    def _make_surrogate(self) -> ExpectedImprovement:
        return ExpectedImprovement(self.decisions, self.seed)
