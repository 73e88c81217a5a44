"""The learned cost model: predicts a config's run time relative to its workload's default.

Gradient-boosted trees (scikit-learn's HistGradientBoostingRegressor) on
name-keyed features (`model.features`): the config's decisions, the workload
(its default build's sizes and counts) and, when the candidate was compiled,
how its executable differs from the default's. The target is
log(median / default median), so workloads of any speed share one model and
a store with many workloads trains it across all of them.

The model is trained online from the store's recorded trials; its ranking
quality is Kendall's tau between predicted and measured times on held-out
trials (`ranking_report`, `xtat model-report`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from threadpoolctl import threadpool_limits

from xtat.core.errors import UserError
from xtat.core.space import config_key
from xtat.core.status import TrialStatus
from xtat.model.features import compiled_features, decision_features, workload_features
from xtat.store.base import Storage


class FeatureSet(StrEnum):
    """What the model sees of a measured config."""

    DECISIONS = "decisions"  # the config's decisions
    WORKLOAD = "workload"  # the default program's cost and memory analysis and HLO features
    COMPILED = "compiled"  # the candidate's compile-time metrics, relative to the default's


FEATURE_SETS = tuple(FeatureSet)


@dataclass(frozen=True)
class Example:
    """One measured config as the model sees it."""

    workload_id: int
    workload: str  # the workload's name
    features: dict[str, float]
    log_ratio: float  # log(median / the workload's default median)


def examples(store: Storage, feature_sets: Sequence[FeatureSet | str] = FEATURE_SETS) -> list[Example]:
    """Every timed config in the store (raced ones included: a slow time is still a time), for
    the workloads whose default was timed."""
    unknown = {str(s) for s in feature_sets} - set(FEATURE_SETS)
    if unknown:
        raise UserError(f"unknown feature set(s) {sorted(unknown)}; choose from {', '.join(FEATURE_SETS)}")
    chosen = {FeatureSet(s) for s in feature_sets}
    out = []
    for workload in store.workloads():
        trials = store.trials(workload.id)
        default = next((t for t in trials if not t.config and t.status == TrialStatus.OK and t.median_s), None)
        if default is None or default.median_s is None:
            continue
        for trial in trials:
            if not trial.status.measured or not trial.median_s:
                continue
            features: dict[str, float] = {}
            if FeatureSet.DECISIONS in chosen:
                features.update(decision_features(trial.config))
            if FeatureSet.WORKLOAD in chosen:
                features.update(workload_features(default.metrics))
            if FeatureSet.COMPILED in chosen:
                features.update(compiled_features(trial.metrics, default.metrics))
            out.append(Example(workload.id, workload.name, features,
                               float(np.log(trial.median_s / default.median_s))))
    return out


@dataclass(frozen=True)
class Prior:
    """What the other workloads in the store teach a search on this one: their timed configs
    (decision and workload features, log time relative to their default), this workload's
    features, and its default's median, so that its own times join on the same scale."""

    examples: tuple[Example, ...]
    workload: dict[str, float]
    default_s: float


def prior(store: Storage, workload_id: int, learn_from: Sequence[Storage] = ()) -> Prior | None:
    """The cross-workload training data for a search on `workload_id` (None before its default
    is timed): the store's other workloads, and those of the stores in `learn_from` (opened read
    only by the tuner; their records of this same workload, by fingerprint, are left out: the
    prior is what the *other* workloads teach)."""
    default = store.trial(workload_id, config_key({}))
    if default is None or default.status != "ok" or not default.median_s:
        return None
    features = ("decisions", "workload")
    others = [e for e in examples(store, features) if e.workload_id != workload_id]
    fingerprint = next(w.fingerprint for w in store.workloads() if w.id == workload_id)
    for other in learn_from:
        same = {w.id for w in other.workloads() if w.fingerprint == fingerprint}
        others += [e for e in examples(other, features) if e.workload_id not in same]
    return Prior(tuple(others), workload_features(default.metrics), default.median_s)


class CostModel:
    """Boosted trees over feature dicts; deterministic for a seed."""

    def __init__(self, seed: int = 0):
        from sklearn.ensemble import HistGradientBoostingRegressor
        from sklearn.feature_extraction import DictVectorizer

        self._vectorizer = DictVectorizer(sparse=False)
        # Tens of trials, not thousands: small leaves, no early stopping (it would hold out data).
        self._trees = HistGradientBoostingRegressor(max_iter=60, learning_rate=0.15, max_leaf_nodes=8,
                                                    min_samples_leaf=2, early_stopping=False, random_state=seed)

    def fit(self, features: list[dict[str, float]], log_ratios: Sequence[float]) -> CostModel:
        # One thread: tens of rows gain nothing from OpenMP, and on a busy machine its
        # spinning threads made a fit take seconds instead of tens of milliseconds.
        with threadpool_limits(1):
            self._trees.fit(self._vectorizer.fit_transform(features), np.asarray(log_ratios, dtype=float))
        return self

    def predict(self, features: list[dict[str, float]]) -> np.ndarray:
        """Predicted log(time / default time); features never seen in training are ignored."""
        with threadpool_limits(1):
            return self._trees.predict(self._vectorizer.transform(features))


@dataclass(frozen=True)
class RankingReport:
    feature_sets: tuple[str, ...]
    workloads: int
    train: int
    test: int
    kendall_tau: float  # predicted vs measured on the held-out trials, all workloads pooled
    p_value: float
    per_workload: dict[str, float] = field(default_factory=dict)  # tau within each workload with >= 5 held out


def held_out_ranking(train: list[Example], test: list[Example], seed: int = 0
                     ) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Train on `train`, predict `test`: (predicted, measured log ratios, Kendall's tau, its p-value)."""
    from scipy.stats import kendalltau

    model = CostModel(seed).fit([e.features for e in train], [e.log_ratio for e in train])
    predicted = model.predict([e.features for e in test])
    measured = np.array([e.log_ratio for e in test])
    tau, p = kendalltau(predicted, measured)
    return predicted, measured, float(tau), float(p)


def ranking_report(data: list[Example], feature_sets: Sequence[str], holdout: float = 0.3,
                   seed: int = 0) -> RankingReport:
    """Train on a random (1 - holdout) of the examples, rank the rest, report Kendall's tau."""
    from scipy.stats import kendalltau

    if not 0 < holdout < 1:
        raise UserError(f"--holdout {holdout}: choose a fraction between 0 and 1")
    if len(data) < 10:
        raise UserError(f"the store has {len(data)} timed trials; the cost model needs at least 10 "
                        "(run `xtat tune` on a workload first)")
    order = np.random.default_rng(seed).permutation(len(data))
    n_test = max(3, int(round(holdout * len(data))))
    test, train = [data[i] for i in order[:n_test]], [data[i] for i in order[n_test:]]
    predicted, measured, tau, p = held_out_ranking(train, test, seed)
    per_workload = {}
    for name in sorted({e.workload for e in test}):
        mine = [i for i, e in enumerate(test) if e.workload == name]
        if len(mine) >= 5:
            per_workload[name] = float(kendalltau(predicted[mine], measured[mine])[0])
    return RankingReport(tuple(feature_sets), len({e.workload for e in data}), len(train), len(test),
                         float(tau), float(p), per_workload)
