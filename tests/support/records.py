"""Adopted records written straight into a store: the tuner's output, minus the tuning.

Each comes with the verified `ok` trial of its config that vetting requires,
as a tuning run would leave it.
"""

from __future__ import annotations

from tiny import tiny_mlp
from xtat.capture.workload import capture
from xtat.core.status import TrialStatus
from xtat.store.records import ResultDetail, Timing, TrialOutcome
from xtat.store.sql import Store


def adopt(db, config: dict, *, name: str = "tiny_mlp", workload=None, env: dict | None = None,
          settings: dict | None = None, trial: bool = True, adopted: bool = True, detail: dict | None = None) -> int:
    """Write `workload` (tiny_mlp) with `config` adopted; returns the workload's row id."""
    identity = capture(workload or tiny_mlp()).identity
    store = Store.open(db)
    try:
        fingerprint = identity.fingerprint if env is None else identity.fingerprint + "-elsewhere"
        workload_id = store.upsert_workload(fingerprint, identity.program, name, env or identity.env, {})
        run_id = store.begin_run(workload_id, settings or {})
        if trial:
            trial_id = store.start_trial(workload_id, run_id, config, _key(config))
            store.finish_trial(trial_id, ended("ok", median_s=5e-4, ci=(4e-4, 6e-4), samples=[5e-4] * 3))
        store.add_result(workload_id, run_id, adopted, config, 1e-3, 5e-4, (2.0, 1.5, 2.5),
                         ResultDetail.from_json(detail))
        store.finish_run(run_id)
        return workload_id
    finally:
        store.close()


def _key(config: dict) -> str:
    from xtat.core.space import config_key

    return config_key(config)


def ended(status: str | TrialStatus, *, median_s: float | None = None, ci: tuple[float, float] | None = None,
          samples: list[float] | None = None, speedup: tuple[float, float, float] | None = None,
          **fields) -> TrialOutcome:
    """A trial outcome as a test writes it straight into a store: timed when it has a median."""
    timing = None if median_s is None else Timing(median_s, ci, tuple(samples) if samples else None, speedup=speedup)
    return TrialOutcome(TrialStatus(status), timing=timing, **fields)
