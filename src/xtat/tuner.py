"""One tuning run: capture -> space -> strategy -> builder/runner -> store -> result.

The tuner process only orchestrates. Compiling, verifying and timing happen
in worker processes (`runner.pool`), one candidate at a time, so a crash,
hang or out-of-memory costs one candidate and never the run. The pieces of
a run live in `xtat.tuning`; this module wires them together.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from xtat.model.objectives import pareto_front
from xtat.runner.load import LoadMonitor
from xtat.runner.session import Session
from xtat.space.space import config_key
from xtat.stages.base import Context
from xtat.store.sqlite import Store, Trial
from xtat.tuning.adoption import finalize
from xtat.tuning.loop import SearchLoop, formulate
from xtat.tuning.result import TrialEvent, TuneResult
from xtat.tuning.session import make_stages, open_session, rewritten_exporter
from xtat.tuning.settings import FORMULATIONS, TuneSettings
from xtat.workload import Capture, Workload, capture

__all__ = ["FORMULATIONS", "TrialEvent", "TuneResult", "TuneSettings", "make_stages", "rewritten_exporter", "tune"]


def _counts(trials: list[Trial]) -> dict[str, int]:
    return dict(sorted(Counter(t.status for t in trials).items()))


def tune(
    workload: Workload,
    *,
    db: str | Path | None = None,
    settings: TuneSettings | None = None,
    on_trial: Callable[[TrialEvent], None] | None = None,
    **overrides,
) -> TuneResult:
    """Tune `workload` and record every attempt; returns the (maybe adopted) result.

    Keyword overrides are TuneSettings fields: `xtat.tune(w, budget=20, seed=1)`.
    """
    settings = settings or TuneSettings(**overrides)
    started = time.perf_counter()
    captured = capture(workload)
    if "codegen" in settings.stages:  # bad --options fail here, before anything is written
        from xtat.space.space import codegen_space

        codegen_space(captured.identity.env["platform"], settings.allow_numerics_change, settings.options)
    store = Store.open(db)
    try:
        with open_session(captured, settings) as session:
            return _tune(captured, store, session, settings, started, on_trial)
    finally:
        store.close()


def _tune(captured: Capture, store: Store, session: Session, settings: TuneSettings, started: float,
          on_trial: Callable[[TrialEvent], None] | None) -> TuneResult:
    # A workload not seen before must build and run under the default before
    # anything is written, so that a broken one leaves no row. A recorded one
    # starts its worker only when something new is to be measured.
    known = store.workload(captured.fingerprint)
    default_trial = store.trial(known.id, config_key({})) if known else None
    if default_trial is None or default_trial.status != "ok":
        session.worker()

    identity = captured.identity
    workload_id = store.upsert_workload(
        identity.fingerprint, identity.program, captured.name, identity.env,
        {"avals": identity.avals, "cost": captured.cost},
    )
    run_id = store.begin_run(workload_id, asdict(settings))
    stages = make_stages()
    searched = [stage for stage in stages if stage.name in settings.stages]
    workload = captured.workload
    context = Context(*workload.bound(), identity.env["platform"],
                      settings.allow_numerics_change, settings.options, session.passes_that_ran)
    search = SearchLoop(store, session, workload_id, run_id, settings, stages, on_trial)
    monitor = LoadMonitor(session.pids)
    search.consider({})  # the default first, always
    formulate(search, searched, context, settings)
    search_load = monitor.report()

    latest = store.latest_result(workload_id)
    if search.new_trials == 0 and latest is not None and "summary" in latest.detail:
        # Nothing new was measured: the recorded decision stands (a rerun is a no-op).
        summary = {**latest.detail["summary"], "message": latest.detail["summary"]["message"] + " (recorded)"}
    else:
        summary, spent = finalize(captured, store, session, workload_id, settings, stages)
        search.worker_s += spent
        summary["no_ops"] = search.no_ops
        summary["notes"] = [f"{stage.name} stage left out: {stage.unavailable}" for stage in searched
                            if getattr(stage, "unavailable", None)]
        summary["notes"] += [f"{len(ids)} decision(s) inactive, they need {needs} which was not searchable "
                             f"then: {', '.join(ids[:3])}{' ...' if len(ids) > 3 else ''}"
                             for needs, ids in search.inactive.items()]
        summary["search_load"] = search_load.to_json()
        if search_load.other_cores is not None and search_load.other_cores >= settings.load_threshold_cores:
            summary["notes"].append(f"the search ran under load: {search_load.describe()}")
        if session.budget.widened:  # a chaotic program: say how much its outputs may move
            summary["notes"].append(f"verification budget {session.budget.describe()}")
        speedup = (summary["speedup"], *summary["speedup_ci"]) if summary["finalists"] else None
        store.add_result(workload_id, run_id, summary["adopted"], summary["best_config"],
                         summary["default_ms"] / 1e3, summary["best_ms"] / 1e3, speedup,
                         {"summary": summary, "verification": session.budget.to_json()})
    store.finish_run(run_id, "finished")
    summary = {**summary, "default_ci_ms": tuple(summary["default_ci_ms"]),
               "best_ci_ms": tuple(summary["best_ci_ms"]), "speedup_ci": tuple(summary["speedup_ci"])}
    pareto = pareto_front(store.trials(workload_id), settings.objectives) if len(settings.objectives) > 1 else []
    return TuneResult(**summary, trials=_counts(store.trials(workload_id)), new_trials=search.new_trials,
                      history=search.history, pareto=pareto,
                      wall_s=time.perf_counter() - started, worker_s=search.worker_s, db=str(store.path))
