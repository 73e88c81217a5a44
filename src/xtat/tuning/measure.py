"""One config measured: compiled, deduplicated by executable, verified and timed (raced against
the incumbent) in a worker; always leaves a final status in the store."""

from __future__ import annotations

import time

from xtat.errors import UserError
from xtat.runner.pool import WorkerFailure
from xtat.runner.session import DEFAULT_ID, Session
from xtat.space.space import Config, config_id, config_key
from xtat.stages.base import Candidate
from xtat.store.sqlite import Store, Trial
from xtat.tuning.settings import TuneSettings


def measure(store: Store, session: Session, workload_id: int, run_id: int, config: Config, candidate: Candidate,
             key: str, settings: TuneSettings) -> tuple[Trial, float]:
    """Compile, deduplicate, verify and time one config; always leaves a final status."""
    trial_id = store.start_trial(workload_id, run_id, config, key)
    if trial_id is None:  # another tuner on the same database measured it first
        return store.trial(workload_id, key), 0.0  # type: ignore[return-value]
    started = time.perf_counter()

    def finish(status: str, **fields) -> Trial:
        # spent_s is the wall time of this trial: the --time budget sums it, so a
        # resumed run stops where the uninterrupted one would have.
        store.finish_trial(trial_id, status, spent_s=time.perf_counter() - started, **fields)
        return store.trial(workload_id, key)  # type: ignore[return-value]

    is_default = not config
    cid = DEFAULT_ID if is_default else config_id(config)
    spent = 0.0
    try:
        worker = session.worker(candidate.env)
        reply = session.compile(worker, cid, candidate, is_default=is_default)
        if not reply.get("ok"):
            discard_after_oom(session, candidate, reply)
            return finish(reply["status"], error=reply.get("error")), spent
        spent += 0.0 if reply.get("cached") else reply["compile_s"]
        compile_s, exe_hash, metrics = reply["compile_s"], reply["exe_hash"], reply.get("metrics") or {}
        same = store.measured_with_hash(workload_id, exe_hash, trial_id)
        if same is not None:
            worker.request("release", session.compile_deadline_s, ids=[cid])
            return finish(
                "duplicate", compile_s=compile_s, exe_hash=exe_hash, same_as=same.id,
                median_s=same.median_s, ci_low_s=same.ci_low_s, ci_high_s=same.ci_high_s,
                error=None if same.status == "ok" else f"same executable as trial {same.id} ({same.status})",
                worker_s=compile_s, metrics={**metrics, "raced": bool((same.metrics or {}).get("raced"))},
            ), spent
        racing = not is_default and settings.race_margin is not None
        incumbent_s = race_incumbent_s(store.trials(workload_id)) if racing else None
        race = None if incumbent_s is None else {"incumbent_s": incumbent_s, "margin": settings.race_margin,
                                                 "min_samples": settings.race_min_samples}
        reply = worker.request("measure", session.measure_deadline_s, id=cid, tolerance=settings.tolerance,
                               timing=settings.timing, is_default=is_default, race=race)
        worker.request("release", session.compile_deadline_s, ids=[cid])
        if not reply.get("ok"):
            discard_after_oom(session, candidate, reply)
            if reply.get("mismatches"):  # which rule failed, where and by how much
                metrics["mismatches"] = reply["mismatches"]
            return finish(reply["status"], error=reply.get("error"), compile_s=compile_s, exe_hash=exe_hash,
                          max_abs_err=reply.get("max_abs_err"), max_rel_err=reply.get("max_rel_err"),
                          metrics=metrics), spent
        metrics["raced"] = bool(reply.get("raced"))
        spent += reply["measure_s"]
        default = None if is_default else store.trial(workload_id, config_key({}))
        if default is not None and default.median_s and \
                reply["median_s"] * settings.impossible_speedup < default.median_s:
            return finish("wrong_result", compile_s=compile_s, exe_hash=exe_hash, median_s=None,
                          error=f"impossibly fast: {default.median_s / reply['median_s']:.0f}x faster than the "
                                f"default (limit {settings.impossible_speedup:g}x); work skipped or outputs stale?"
                          ), spent
        return finish(
            "ok", compile_s=compile_s, exe_hash=exe_hash, median_s=reply["median_s"],
            ci_low_s=reply["ci_s"][0], ci_high_s=reply["ci_s"][1], samples=reply["samples"],
            max_abs_err=reply.get("max_abs_err"), max_rel_err=reply.get("max_rel_err"),
            worker_s=compile_s + reply["measure_s"], metrics=metrics,
        ), spent
    except WorkerFailure as failure:
        session.discard(candidate.env)
        return finish(failure.status, error=failure.error), spent
    except UserError as exc:  # the program stage could not rewrite this config
        return finish("compile_error", error=str(exc)), spent


def race_incumbent_s(trials: list[Trial]) -> float | None:
    """What a candidate must race against: the upper interval bound of the fastest fully timed
    trial (its median alone, measured in a quiet moment of a busy machine, raced too many)."""
    timed = [t for t in trials if t.status == "ok" and t.median_s is not None and not (t.metrics or {}).get("raced")]
    best = min(timed, key=lambda t: t.median_s, default=None)  # type: ignore[arg-type, return-value]
    return None if best is None else max(best.median_s, best.ci_high_s or 0.0)  # type: ignore[type-var]


def discard_after_oom(session: Session, candidate: Candidate, reply: dict) -> None:
    """After an out-of-memory the next candidate starts in a fresh process with all memory free."""
    if reply.get("status") == "oom":
        session.discard(candidate.env)
