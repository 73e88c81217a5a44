"""Adoption: the fastest finalists re-measured interleaved with the default in fresh workers,
re-verified on a second input set, and adopted only when the speedup's interval clears the
tie margin."""

from __future__ import annotations

import time

from xtat.runner.pool import WorkerFailure
from xtat.runner.session import Session
from xtat.space.space import config_id
from xtat.stages.base import Candidate, concretize
from xtat.store.sqlite import Store
from xtat.tuning.confirmation import Confirmation, Verdict, confirm
from xtat.tuning.settings import TuneSettings
from xtat.tuning.side_by_side import side_by_side
from xtat.workload import Capture


def outcome(base: dict, best: dict | None, adopted: bool, message: str, finalists: list[dict]) -> dict:
    """The outcome fields of TuneResult; also stored with the result row so a rerun can report it."""
    best = best or {"median_s": base["default_ms"] / 1e3, "ci_s": [x / 1e3 for x in base["default_ci_ms"]],
                    "speedup": 1.0, "speedup_ci": [1.0, 1.0], "config": {}}
    return {**base, "best_ms": best["median_s"] * 1e3, "best_ci_ms": [x * 1e3 for x in best["ci_s"]],
            "speedup": best["speedup"], "speedup_ci": list(best["speedup_ci"]), "adopted": adopted,
            "best_config": best["config"] if adopted else {}, "finalists": finalists, "message": message,
            "no_ops": [], "notes": [], "confirmation": best.get("confirmation", {})}


def finalize(captured: Capture, store: Store, session: Session, workload_id: int, settings: TuneSettings,
              stages: list) -> tuple[dict, float]:
    """Re-measure the top finalists interleaved with the default in fresh workers; adopt or not."""
    trials = store.trials(workload_id)
    default = next((t for t in trials if not t.config and t.status == "ok"), None)
    assert default is not None and default.median_s is not None
    candidates, seen = [], {default.exe_hash}
    # A raced trial's median rests on a few samples of a candidate already known to be slower.
    for t in sorted((t for t in trials if t.config and t.status == "ok" and t.median_s is not None
                     and not (t.metrics or {}).get("raced")),
                    key=lambda t: t.median_s):  # type: ignore[arg-type, return-value]
        # One search timing is not interleaved with the default's and moves by several percent
        # between moments: a config timed a little slower may still be the faster one.
        if t.exe_hash in seen or t.median_s >= default.median_s * (1.0 + settings.finalist_margin):  # type: ignore[operator]
            continue
        seen.add(t.exe_hash)
        candidates.append(t)
        if len(candidates) == settings.finalists:
            break
    base = {
        "workload": captured.name, "fingerprint": captured.fingerprint,
        "default_ms": default.median_s * 1e3,
        "default_ci_ms": [default.ci_low_s * 1e3, default.ci_high_s * 1e3],  # type: ignore[operator]
    }
    if not candidates:
        message = "no significant improvement: no candidate came within the finalist margin of the default in the search"
        return outcome(base, None, False, message, []), 0.0

    start = time.perf_counter()
    try:
        result = side_by_side(session, stages, {str(t.id): t.config for t in candidates}, settings)
    except WorkerFailure as failure:
        message = f"no significant improvement: finalist re-measurement failed ({failure.status}: {failure.error})"
        return outcome(base, None, False, message, []), time.perf_counter() - start
    spent = time.perf_counter() - start
    if result.default is None:
        return outcome(base, None, False, "no significant improvement: the default failed to rebuild", []), spent

    d = result.default
    base.update(default_ms=d.median_s * 1e3, default_ci_ms=[x * 1e3 for x in d.ci_s])  # type: ignore[operator, union-attr]
    measured = [{"trial": t.id, "config": t.config, "median_s": m.median_s, "ci_s": list(m.ci_s),
                 "speedup": m.speedup, "speedup_ci": list(m.speedup_ci)}  # type: ignore[arg-type]
                for t in candidates if (m := result.configs[str(t.id)]).error is None]
    measured.sort(key=lambda m: -m["speedup"])

    for m in measured:
        if m["speedup"] <= 1.0 + settings.tie_margin:
            continue  # not faster, or a tie
        candidate = concretize(stages, m["config"])
        if captured.verify_inputs is not None:
            check = verify_on_second_inputs(session, candidate, m, settings)
            m["verified_on_second_inputs"] = bool(check.get("ok"))
            if not check.get("ok"):
                reason = check.get("mismatch") or check.get("error")
                store.demote_trial(m["trial"], f"failed re-verification on make_inputs(1): {reason}")
                continue
        # One confirmation per run: its error rate is the run's.
        confirmed = confirm(session, candidate, config_id(m["config"]), settings)
        spent = time.perf_counter() - start
        m.update(search_speedup=m["speedup"], search_speedup_ci=m["speedup_ci"],
                 confirmation=confirmed.to_json())
        if confirmed.verdict is not Verdict.FAILED:
            m.update(speedup=confirmed.speedup, speedup_ci=list(confirmed.speedup_ci),
                     median_s=confirmed.candidate_s, ci_s=list(confirmed.candidate_ci_s))
            base.update(default_ms=confirmed.default_s * 1e3,
                        default_ci_ms=[x * 1e3 for x in confirmed.default_ci_s])
        adopted, message = judge(confirmed, settings)
        if adopted:
            message += deployment_note(m["config"])
        return outcome(base, m, adopted, message, measured), spent
    top = measured[0] if measured else None
    demoted = sum(m.get("verified_on_second_inputs") is False for m in measured)
    if demoted:
        message = f"no significant improvement: {demoted} faster finalist(s) failed re-verification and were demoted"
    else:
        message = "no significant improvement"
    message += ": the default stays"
    return outcome(base, top, False, message, measured), spent


def deployment_note(config: dict) -> str:
    """How to get an adopted win that xtat.jit alone cannot give: runtime decisions were confirmed
    in a process started with them, and a running process cannot take them on."""
    runtime = config.get("runtime")
    if not runtime:
        return ""
    decided = ", ".join(f"{name}={value}" for name, value in sorted(runtime.items()))
    return (f"; its runtime decisions ({decided}) are set when a process starts: deploy with "
            "`xtat run -- python your_script.py` (xtat.jit alone applies only the rest)")


def judge(confirmed: Confirmation, settings: TuneSettings) -> tuple[bool, str]:
    """Adopt or not on the confirmation, and the message that says why."""
    figure = f"{confirmed.speedup:.3f}x [{confirmed.speedup_ci[0]:.3f}, {confirmed.speedup_ci[1]:.3f}]"
    where = f"through jax.jit in fresh processes, {confirmed.rounds} interleaved rounds"
    if confirmed.verdict is Verdict.FAILED:
        return False, f"no significant improvement: confirmation failed ({confirmed.error}): the default stays"
    if confirmed.verdict is Verdict.FASTER:
        if confirmed.load_dependent and confirmed.load is not None:
            if not settings.adopt_under_load:
                return False, (f"not adopted: {figure} faster {where}, but load-dependent: "
                               f"{confirmed.load.describe()} (--adopt-under-load adopts it): the default stays")
            return True, f"adopted under load: {figure} faster {where}; {confirmed.load.describe()}"
        return True, f"adopted: {figure} faster than the default, confirmed {where}"
    if confirmed.verdict is Verdict.NOT_FASTER:
        tie = confirmed.speedup_ci[0] > 1.0
        return False, (f"{'a tie: faster, but by less than the tie margin' if tie else 'no significant improvement'}"
                       f": {figure} {where}: the default stays")
    return False, (f"no significant improvement: confirmation inconclusive, {figure} {where} (the interval "
                   f"straddles {1 + settings.tie_margin:g}; a longer --confirm-time may settle it): the default stays")


def verify_on_second_inputs(session: Session, candidate: Candidate, finalist: dict,
                             settings: TuneSettings) -> dict:
    """Check a finalist on make_inputs(1), rebuilding it if an earlier check killed its worker."""
    cid = config_id(finalist["config"])
    try:
        worker, started = session.worker_and_start(candidate.env)
        if started:
            reply = session.compile(worker, cid, candidate)
            if not reply.get("ok"):
                return reply
        # Several checks: a config that is wrong only some of the time must not slip through.
        for _ in range(settings.verify_repeats):
            reply = worker.request("verify", session.measure_deadline_s, id=cid, input_set="verify",
                                   tolerance=settings.tolerance)
            if not reply.get("ok"):
                return reply
        return reply
    except WorkerFailure as failure:
        session.discard(candidate.env)
        return {"ok": False, "error": f"{failure.status}: {failure.error}"}
