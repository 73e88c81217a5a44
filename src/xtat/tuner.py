"""One tuning run: capture -> space -> strategy -> builder/runner -> store -> result.

The tuner process only orchestrates. Compiling, verifying and timing happen
in worker processes (`runner.pool`), one candidate at a time, so a crash,
hang or out-of-memory costs one candidate and never the run.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from xtat.errors import UserError
from xtat.runner.pool import Pool, WorkerFailure, WorkerProcess
from xtat.runner.timing import TimingPolicy, median_ci, speedup_ci
from xtat.search.sweep import SweepThenRandom
from xtat.space.space import Config, Space, codegen_space, compile_options, config_id, config_key
from xtat.store.sqlite import Store, Trial
from xtat.workload import Capture, Workload, capture

DEFAULT_ID = "default"


@dataclass(frozen=True)
class TuneSettings:
    budget: int | None = 40  # configs considered, the default and resumed ones included
    time_s: float | None = None  # wall-clock limit of the search loop
    seed: int = 0
    allow_numerics_change: bool = False
    rtol: float | None = None
    atol: float | None = None
    options: tuple[str, ...] | None = None  # restrict the search to these XLA options
    finalists: int = 3
    rounds: int = 21  # interleaved rounds when re-measuring finalists
    min_sample_s: float = 0.02
    samples: int = 7
    deadline_factor: float = 10.0  # deadlines are this multiple of the default's times
    min_deadline_s: float = 30.0
    startup_deadline_s: float = 180.0

    def __post_init__(self) -> None:
        if self.budget is not None and self.budget < 1:
            raise UserError("--budget must be at least 1")
        if self.time_s is not None and self.time_s <= 0:
            raise UserError("--time must be positive")
        if (self.rtol is not None or self.atol is not None) and not self.allow_numerics_change:
            raise UserError("--rtol/--atol set the tolerance for --allow-numerics-change; pass that flag too")
        if self.allow_numerics_change and self.rtol is None and self.atol is None:
            raise UserError("--allow-numerics-change needs a tolerance: pass --rtol and/or --atol")
        if self.samples < 3 or self.rounds < 3:
            raise UserError("samples and rounds must be at least 3")

    @property
    def timing(self) -> dict:
        return asdict(TimingPolicy(min_sample_s=self.min_sample_s, samples=self.samples, seed=self.seed))

    @property
    def tolerance(self) -> dict:
        return {"rtol": self.rtol, "atol": self.atol}


@dataclass(frozen=True)
class TrialEvent:
    """What the progress display learns after each config."""

    index: int
    config: Config
    status: str
    median_s: float | None
    best_s: float | None
    resumed: bool


@dataclass(frozen=True)
class TuneResult:
    workload: str
    fingerprint: str
    default_ms: float
    default_ci_ms: tuple[float, float]
    best_ms: float
    best_ci_ms: tuple[float, float]
    speedup: float
    speedup_ci: tuple[float, float]
    adopted: bool
    trials: dict[str, int]
    best_config: Config
    new_trials: int
    message: str
    wall_s: float
    worker_s: float
    db: str
    finalists: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "workload": self.workload, "fingerprint": self.fingerprint,
            "default_ms": self.default_ms, "default_ci_ms": list(self.default_ci_ms),
            "best_ms": self.best_ms, "best_ci_ms": list(self.best_ci_ms),
            "speedup": self.speedup, "speedup_ci": list(self.speedup_ci), "adopted": self.adopted,
            "trials": self.trials, "best_config": self.best_config, "new_trials": self.new_trials,
            "message": self.message, "wall_s": self.wall_s, "worker_s": self.worker_s, "db": self.db,
            "finalists": self.finalists,
        }


class _Session:
    """The worker side of a run: a folder of inputs, a pool, deadlines."""

    def __init__(self, captured: Capture, settings: TuneSettings, folder: Path):
        self.captured = captured
        self.settings = settings
        self.folder = folder
        self.pool = Pool(folder)
        (folder / "program.bin").write_bytes(captured.exported)
        np.savez(folder / "inputs_main.npz", *captured.inputs)
        if captured.verify_inputs is not None:
            np.savez(folder / "inputs_verify.npz", *captured.verify_inputs)
        self.compile_deadline_s = settings.startup_deadline_s
        self.measure_deadline_s = settings.startup_deadline_s

    def set_deadlines(self, compile_s: float, measure_s: float) -> None:
        s = self.settings
        self.compile_deadline_s = max(s.min_deadline_s, s.deadline_factor * compile_s)
        self.measure_deadline_s = max(s.min_deadline_s, s.deadline_factor * measure_s)

    def worker(self, fresh: bool = False) -> WorkerProcess:
        return self.worker_and_start(fresh)[0]

    def worker_and_start(self, fresh: bool = False) -> tuple[WorkerProcess, bool]:
        """A loaded worker, and whether it was just started (it then holds no builds)."""
        worker, started = (self.pool.fresh(), True) if fresh else self.pool.get()
        if started:
            reply = worker.request("load", self.settings.startup_deadline_s, folder=str(self.folder))
            if not reply.get("ok"):
                raise UserError(f"worker could not load the program: {reply.get('error')}")
            if not reply.get("has_reference"):
                self._prepare_reference(worker)
        return worker, started

    def _prepare_reference(self, worker: WorkerProcess) -> None:
        """The default build's outputs become the reference (saved for later workers); its compile
        time gives the first deadlines."""
        deadline = self.settings.startup_deadline_s
        try:
            reply = worker.request("compile", deadline, id=DEFAULT_ID, options={}, is_default=True)
            if not reply.get("ok"):
                raise UserError(f"the workload fails under the default compile: {reply.get('error')}")
            self.set_deadlines(reply["compile_s"], deadline / self.settings.deadline_factor)
            reply = worker.request("reference_outputs", deadline, id=DEFAULT_ID)
            if not reply.get("ok"):
                raise UserError(f"the workload fails to run under the default compile: {reply.get('error')}")
            worker.request("release", deadline, ids=[DEFAULT_ID])
        except WorkerFailure as failure:
            raise UserError(
                f"the workload's default build failed in its worker: {failure.status}: {failure.error}"
            ) from None

    def close(self) -> None:
        self.pool.close()


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
    space = codegen_space(captured.identity.env["platform"], settings.allow_numerics_change, settings.options)
    store = Store.open(db)
    folder = Path(tempfile.mkdtemp(prefix="xtat-run-"))
    session = _Session(captured, settings, folder)
    try:
        return _tune(captured, space, store, session, settings, started, on_trial)
    finally:
        session.close()
        store.close()
        shutil.rmtree(folder, ignore_errors=True)


def _tune(captured: Capture, space: Space, store: Store, session: _Session, settings: TuneSettings,
          started: float, on_trial: Callable[[TrialEvent], None] | None) -> TuneResult:
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
        {"avals": identity.avals, "cost": captured.cost, "left_out_options": list(space.left_out)},
    )
    run_id = store.begin_run(workload_id, asdict(settings))
    worker_s = 0.0

    strategy = SweepThenRandom(space, settings.seed)
    considered = new_trials = 0
    used_s = 0.0  # time spent on the trials considered so far, resumed ones included
    best_s: float | None = None
    while settings.budget is None or considered < settings.budget:
        if settings.time_s is not None and used_s >= settings.time_s:
            break
        config = strategy.ask()
        if config is None:
            break
        key = config_key(config)
        recorded = store.trial(workload_id, key)
        resumed = recorded is not None and recorded.status != "running"
        if resumed:
            trial = recorded
        else:
            trial, spent = _measure(store, session, workload_id, run_id, config, key, is_default=not config)
            worker_s += spent
            new_trials += 1
        considered += 1
        used_s += trial.spent_s or 0.0
        if not config and trial.status == "ok":
            session.set_deadlines(trial.compile_s or 1.0, max((trial.worker_s or 0) - (trial.compile_s or 0), 0.1))
        elif not config:
            store.finish_run(run_id, "failed")
            raise UserError(f"the workload fails under the default compile: {trial.status}: {trial.error}")
        ok = trial.status in ("ok", "duplicate") and trial.median_s is not None
        strategy.tell(config, trial.median_s if ok else None)
        if ok and (best_s is None or trial.median_s < best_s):  # type: ignore[operator]
            best_s = trial.median_s
        if on_trial:
            on_trial(TrialEvent(considered, config, trial.status, trial.median_s, best_s, resumed))

    latest = store.latest_result(workload_id)
    if new_trials == 0 and latest is not None and "summary" in latest.detail:
        # Nothing new was measured: the recorded decision stands (a rerun is a no-op).
        summary = {**latest.detail["summary"], "message": latest.detail["summary"]["message"] + " (recorded)"}
    else:
        summary, spent = _finalize(captured, store, session, workload_id, settings)
        worker_s += spent
        speedup = (summary["speedup"], *summary["speedup_ci"]) if summary["finalists"] else None
        store.add_result(workload_id, run_id, summary["adopted"], summary["best_config"],
                         summary["default_ms"] / 1e3, summary["best_ms"] / 1e3, speedup, {"summary": summary})
    store.finish_run(run_id, "finished")
    summary["default_ci_ms"], summary["best_ci_ms"] = tuple(summary["default_ci_ms"]), tuple(summary["best_ci_ms"])
    summary["speedup_ci"] = tuple(summary["speedup_ci"])
    return TuneResult(**summary, trials=_counts(store.trials(workload_id)), new_trials=new_trials,
                      wall_s=time.perf_counter() - started, worker_s=worker_s, db=str(store.path))


def _measure(store: Store, session: _Session, workload_id: int, run_id: int, config: Config, key: str,
             is_default: bool) -> tuple[Trial, float]:
    """Compile, deduplicate, verify and time one config; always leaves a final status."""
    trial_id = store.start_trial(workload_id, run_id, config, key)
    started = time.perf_counter()

    def finish(status: str, **fields) -> None:
        # spent_s is the wall time of this trial: the --time budget sums it, so a
        # resumed run stops where the uninterrupted one would have.
        store.finish_trial(trial_id, status, spent_s=time.perf_counter() - started, **fields)

    cid = DEFAULT_ID if is_default else config_id(config)
    tolerance = session.settings.tolerance
    spent = 0.0
    try:
        worker = session.worker()
        reply = worker.request("compile", session.compile_deadline_s, id=cid, options=compile_options(config),
                               is_default=is_default)
        if not reply.get("ok"):
            _discard_after_oom(session, reply)
            finish(reply["status"], error=reply.get("error"))
            return store.trial(workload_id, key), spent  # type: ignore[return-value]
        spent += reply["compile_s"]
        compile_s, exe_hash = reply["compile_s"], reply["exe_hash"]
        same = store.measured_with_hash(workload_id, exe_hash)
        if same is not None:
            worker.request("release", session.compile_deadline_s, ids=[cid])
            finish(
                "duplicate", compile_s=compile_s, exe_hash=exe_hash, same_as=same.id,
                median_s=same.median_s, ci_low_s=same.ci_low_s, ci_high_s=same.ci_high_s,
                error=None if same.status == "ok" else f"same executable as trial {same.id} ({same.status})",
                worker_s=compile_s,
            )
            return store.trial(workload_id, key), spent  # type: ignore[return-value]
        reply = worker.request("measure", session.measure_deadline_s, id=cid, tolerance=tolerance,
                               timing=session.settings.timing, is_default=is_default)
        worker.request("release", session.compile_deadline_s, ids=[cid])
        if not reply.get("ok"):
            _discard_after_oom(session, reply)
            finish(reply["status"], error=reply.get("error"), compile_s=compile_s,
                               exe_hash=exe_hash, max_abs_err=reply.get("max_abs_err"),
                               max_rel_err=reply.get("max_rel_err"))
            return store.trial(workload_id, key), spent  # type: ignore[return-value]
        spent += reply["measure_s"]
        finish(
            "ok", compile_s=compile_s, exe_hash=exe_hash, median_s=reply["median_s"],
            ci_low_s=reply["ci_s"][0], ci_high_s=reply["ci_s"][1], samples=reply["samples"],
            max_abs_err=reply.get("max_abs_err"), max_rel_err=reply.get("max_rel_err"),
            worker_s=compile_s + reply["measure_s"],
        )
    except WorkerFailure as failure:
        session.pool.discard()
        finish(failure.status, error=failure.error)
    return store.trial(workload_id, key), spent  # type: ignore[return-value]


def _discard_after_oom(session: _Session, reply: dict) -> None:
    """After an out-of-memory the next candidate starts in a fresh process with all memory free."""
    if reply.get("status") == "oom":
        session.pool.discard()


def _summary(base: dict, best: dict | None, adopted: bool, message: str, finalists: list[dict]) -> dict:
    """The outcome fields of TuneResult; also stored with the result row so a rerun can report it."""
    best = best or {"median_s": base["default_ms"] / 1e3, "ci_s": [x / 1e3 for x in base["default_ci_ms"]],
                    "speedup": 1.0, "speedup_ci": [1.0, 1.0], "config": {}}
    return {**base, "best_ms": best["median_s"] * 1e3, "best_ci_ms": [x * 1e3 for x in best["ci_s"]],
            "speedup": best["speedup"], "speedup_ci": list(best["speedup_ci"]), "adopted": adopted,
            "best_config": best["config"] if adopted else {}, "finalists": finalists, "message": message}


def _finalize(captured: Capture, store: Store, session: _Session, workload_id: int,
              settings: TuneSettings) -> tuple[dict, float]:
    """Re-measure the top finalists interleaved with the default in a fresh worker; adopt or not."""
    trials = store.trials(workload_id)
    default = next((t for t in trials if not t.config and t.status == "ok"), None)
    assert default is not None and default.median_s is not None
    candidates, seen = [], {default.exe_hash}
    for t in sorted((t for t in trials if t.config and t.status == "ok" and t.median_s is not None),
                    key=lambda t: t.median_s):  # type: ignore[arg-type, return-value]
        if t.exe_hash in seen or t.median_s >= default.median_s:  # type: ignore[operator]
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
        return _summary(base, None, False, "no significant improvement: no candidate beat the default", []), 0.0

    spent = 0.0  # compile and measurement time inside the worker, not its start-up
    try:
        worker = session.worker(fresh=True)
        ids = []
        for cid, config in [(DEFAULT_ID, {}), *((config_id(t.config), t.config) for t in candidates)]:
            reply = worker.request("compile", session.compile_deadline_s, id=cid, options=compile_options(config),
                                   is_default=not config)
            if reply.get("ok"):
                ids.append(cid)
                spent += reply["compile_s"]
        if DEFAULT_ID not in ids:
            raise WorkerFailure("compile_error", "the default no longer compiles in a fresh worker")
        deadline = session.measure_deadline_s * (1 + settings.rounds / max(settings.samples, 1))
        start = time.perf_counter()
        reply = worker.request("interleave", deadline, ids=ids, rounds=settings.rounds, timing=settings.timing)
        spent += time.perf_counter() - start
        samples = reply["samples"]
    except WorkerFailure as failure:
        session.pool.discard()
        message = f"no significant improvement: finalist re-measurement failed ({failure.status}: {failure.error})"
        return _summary(base, None, False, message, []), spent

    base_samples = samples[DEFAULT_ID]
    d_median, d_low, d_high = median_ci(base_samples, seed=settings.seed)
    base.update(default_ms=d_median * 1e3, default_ci_ms=[d_low * 1e3, d_high * 1e3])
    measured: list[dict] = []
    for t in candidates:
        cid = config_id(t.config)
        if cid not in samples:
            continue
        s_median, s_low, s_high = speedup_ci(base_samples, samples[cid], seed=settings.seed)
        c_median, c_low, c_high = median_ci(samples[cid], seed=settings.seed)
        measured.append({"trial": t.id, "config": t.config, "median_s": c_median, "ci_s": [c_low, c_high],
                         "speedup": s_median, "speedup_ci": [s_low, s_high]})
    measured.sort(key=lambda m: -m["speedup"])

    for m in measured:
        if m["speedup_ci"][0] <= 1.0:
            continue
        if captured.verify_inputs is not None:
            check = _verify_on_second_inputs(session, m, settings)
            m["verified_on_second_inputs"] = bool(check.get("ok"))
            if not check.get("ok"):
                reason = check.get("mismatch") or check.get("error")
                store.demote_trial(m["trial"], f"failed re-verification on make_inputs(1): {reason}")
                continue
        return _summary(base, m, True, f"adopted: {m['speedup']:.3f}x faster than the default", measured), spent
    top = measured[0] if measured else None
    return _summary(base, top, False, "no significant improvement: the default stays", measured), spent


def _verify_on_second_inputs(session: _Session, finalist: dict, settings: TuneSettings) -> dict:
    """Check a finalist on make_inputs(1), rebuilding it if an earlier check killed the worker."""
    cid = config_id(finalist["config"])
    try:
        worker, started = session.worker_and_start()
        if started:
            reply = worker.request("compile", session.compile_deadline_s, id=cid,
                                   options=compile_options(finalist["config"]))
            if not reply.get("ok"):
                return reply
        return worker.request("verify", session.measure_deadline_s, id=cid, input_set="verify",
                              tolerance=settings.tolerance)
    except WorkerFailure as failure:
        session.pool.discard()
        return {"ok": False, "error": f"{failure.status}: {failure.error}"}
