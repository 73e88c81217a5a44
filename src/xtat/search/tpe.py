"""Tree-structured Parzen estimator through Optuna's ask/tell API.

Define-by-run: a trial suggests each active decision in order (parents
first), so a conditional decision is suggested only when its parents' values
make it active and Optuna learns the conditional space as it is. The base
config is enqueued as the first trial. The objective is the log of the run
time (a slowdown counts relative to the config's speed); a failed or rejected
config is told as a failed trial, which TPE never takes as a good example.
"""

from __future__ import annotations

import math
import warnings
from collections import deque
from typing import Any

from xtat.core.space import Config, Decision, config_key, is_active
from xtat.search.base import SearchStrategy, value_of, with_value


class TreeParzen(SearchStrategy):
    def __init__(self, decisions: list[Decision], **options: Any) -> None:
        # Each proposal of a known config is an Optuna trial, and a trial costs more the more
        # trials the study holds: give up on a converged study sooner than the default.
        options.setdefault("max_tries", 100)
        super().__init__(decisions, **options)
        import optuna  # about a second to import: paid only by runs that choose this strategy

        # Optuna logs every trial at INFO; the tuner reports trials itself.
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            # multivariate + group: one joint density per set of decisions that occur together,
            # which is how TPE models a conditional space. constant_liar: trials still pending
            # (measured by other workers, or by another tuner of the study) count as bad ones, so
            # a batch asked at once spreads out instead of piling onto one region.
            sampler = optuna.samplers.TPESampler(seed=self.seed, multivariate=True, group=True,
                                                 constant_liar=True)
        self._study = optuna.create_study(direction="minimize", sampler=sampler)
        self._study.enqueue_trial({self._name(d): value_of(self.base, d) for d in self.decisions
                                   if is_active(d, self.base)})
        self._trials: dict[str, deque] = {}  # config key -> its trials awaiting a result

    @staticmethod
    def _name(decision: Decision) -> str:
        return f"{decision.stage}.{decision.id}"

    def _first(self) -> Config | None:
        return self._propose()  # the enqueued trial: the base config, known to Optuna as a trial

    def _propose(self) -> Config | None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", self._optuna.exceptions.ExperimentalWarning)
            trial = self._study.ask()
            config = self.base
            for decision in self.active():
                if is_active(decision, config):
                    value = trial.suggest_categorical(self._name(decision), list(decision.values))
                    config = with_value(config, decision, value)
        self._trials.setdefault(config_key(self.normalize(config)), deque()).append(trial)
        return config

    def _observe(self, config: Config, seconds: float | None) -> None:
        trials = self._trials.get(config_key(config))
        if not trials:
            return  # a result for a config it never proposed teaches it nothing about its own trials
        trial = trials.popleft()
        if seconds is None:
            self._study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
        else:
            self._study.tell(trial, math.log(seconds))
