"""One tuning run: capture -> space -> strategy -> builder/runner -> store -> result.

The tuner process only orchestrates. Compiling, verifying and timing happen
in worker processes (`runner.pool`), one candidate at a time, so a crash,
hang or out-of-memory costs one candidate and never the run. The pieces of
a run live in `xtat.tuning`; this module wires them together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xtat.runner.load import MachineLoad

import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import jax

from xtat.capture.workload import Capture, Workload, capture
from xtat.core.errors import StoreError, UserError
from xtat.core.space import config_key
from xtat.core.status import RunStatus, TrialStatus
from xtat.model.objectives import pareto_front
from xtat.runner.base import Deployment, ExecutorKind, Runner
from xtat.runner.load import LoadMonitor
from xtat.stages.base import Context, concretize
from xtat.stages.registry import make_stages
from xtat.stages.tiles import pin_autotuning
from xtat.store import Storage, is_url, open_store, owner_id
from xtat.store.records import ResultDetail, Trial
from xtat.tuning.adoption import called_as_user, finalize
from xtat.tuning.claims import Heartbeat
from xtat.tuning.context import RunContext
from xtat.tuning.loop import POLL_S, SearchLoop, formulate
from xtat.tuning.result import TimeSplit, TrialEvent, TuneResult
from xtat.tuning.session import open_ray_runner, open_runner, rewritten_exporter
from xtat.tuning.settings import FORMULATIONS, TuneSettings

__all__ = ["FORMULATIONS", "TrialEvent", "TuneResult", "TuneSettings", "rewritten_exporter", "tune"]


# How a run gets its runner: given the captured workload and the settings, a context manager
# that yields a Runner and stops its machinery on exit (`tuning.session.open_runner`: worker processes).
RunnerFactory = Callable[[Capture, TuneSettings], AbstractContextManager[Runner]]


def _counts(trials: list[Trial]) -> dict[str, int]:
    return dict(sorted(Counter(t.status.value for t in trials).items()))


def tune(
    workload: Workload,
    *,
    db: str | Path | Storage | None = None,
    settings: TuneSettings | None = None,
    on_trial: Callable[[TrialEvent], None] | None = None,
    runner: RunnerFactory = open_runner,
    **overrides: Any,
) -> TuneResult:
    """Tune `workload` and record every attempt; returns the (maybe adopted) result.

    Keyword overrides are TuneSettings fields: `xtat.tune(w, budget=20, seed=1)`, on top of an effort
    level's preset when one is named (`xtat.tune(w, effort="quick")`: `tuning.settings.Effort`). `db` is the
    store's file (SQLite), or a `store.base.Storage` the caller opened (and closes). `runner`
    opens what builds and times candidates (by default worker processes on this machine).
    """
    if settings is None:
        effort = overrides.pop("effort", None)
        settings = TuneSettings(**overrides) if effort is None else TuneSettings.at(effort, **overrides)
    started = time.perf_counter()
    deadline = None if settings.run_time_s is None else time.monotonic() + settings.run_time_s
    with ExitStack() as stack:
        # Bad --learn-from stores and --options fail here, before anything is written.
        learn_from = [stack.enter_context(_learn_from(path)) for path in settings.learn_from]
        captured = capture(workload)
        if "codegen" in settings.stages:
            from xtat.stages.codegen import codegen_space

            codegen_space(captured.identity.env["platform"], settings.allow_numerics_change, settings.options)
        store = stack.enter_context(open_store(db)) if db is None or isinstance(db, (str, Path)) else db
        if runner is open_runner and settings.measured_by.kind is not ExecutorKind.LOCAL:
            runner = open_ray_runner
        opened = stack.enter_context(runner(captured, settings))
        return _tune(captured, store, opened, settings, started, deadline, on_trial, learn_from)


def _learn_from(path: str) -> Storage:
    """A --learn-from store, opened read only (nothing is written to it)."""
    if not is_url(path) and not Path(path).is_file():
        raise UserError(f"--learn-from {path}: no store there; name the database file of an earlier tuning run "
                        "(xtat tune --db)")
    try:
        return open_store(path, read_only=True)
    except StoreError as exc:
        raise UserError(f"--learn-from {path}: not a store xtat can read ({exc})") from exc


def _tune(captured: Capture, store: Storage, runner: Runner, settings: TuneSettings, started: float,
          deadline: float | None, on_trial: Callable[[TrialEvent], None] | None,
          learn_from: Sequence[Storage]) -> TuneResult:
    # A workload not seen before must build and run under the default before
    # anything is written, so that a broken one leaves no row. A recorded one
    # starts its worker only when something new is to be measured.
    known = store.workload(captured.fingerprint)
    default_trial = store.trial(known.id, config_key({})) if known else None
    if default_trial is None or default_trial.status != "ok":
        runner.start()

    identity = captured.identity
    workload_id = store.upsert_workload(
        identity.fingerprint, identity.program, captured.name, identity.env,
        {"avals": identity.avals, "cost": captured.cost},
    )
    owner = owner_id()
    run_id = store.begin_run(workload_id, asdict(settings), owner, settings.lease_s)
    stages = make_stages()
    searched = [stage for stage in stages if stage.name in settings.stages]
    workload = captured.workload
    context = Context(*workload.bound(), identity.env["platform"],
                      settings.allow_numerics_change, settings.options, runner.passes_that_ran,
                      runner.autotune_results, jax.device_count(),
                      tuple(zip(captured.dims, (tuple(x.shape) for x in captured.inputs), strict=True)),
                      captured.dims_declared, tuple(captured.marks))
    run = RunContext(store, runner, captured, workload_id, run_id, settings, tuple(stages), owner, deadline)
    with Heartbeat(store, run.owner, settings.lease_s):
        search = SearchLoop(run, on_trial, learn_from)
        try:
            monitor = LoadMonitor(runner.pids)
            pin_autotuning(stages, context)  # on GPU, before anything is measured
            search.consider({})  # the default first, always
            as_called = called_as_user(run)
            if as_called:  # what a process setup is worth, measured as the finalists will be
                runner.measure_setups_as(Deployment(settings.tolerance, as_called=True))
            formulate(search, searched, context, settings)
            search_load = monitor.report()
            searched_s = search.used_s - search.resumed_s
        except BaseException:
            search.abandon()  # a trial in flight is measured again on resume, as after a kill
            raise
        finally:
            search.close()
        decide_started = time.perf_counter()
        with deciding(run, search.keys):
            result = _decide(run, search, search_load, searched, as_called)
        decide_s = time.perf_counter() - decide_started
    store.finish_run(run_id)
    pareto = pareto_front(store.trials(workload_id), settings.objectives) if len(settings.objectives) > 1 else []
    return replace(result, trials=_counts(store.trials(workload_id)), history=search.history, pareto=pareto,
                   wall_s=time.perf_counter() - started,
                   time_split=TimeSplit(searched_s, search.compile_s, search.timing_s, decide_s,
                                        time.perf_counter() - started))


@contextmanager
def deciding(run: RunContext, needed: set[str]) -> Iterator[None]:
    """One decision per workload at a time, from every tuner's finished trials, made as soon as the
    configs this run considered (`needed`, by key) are measured: a tuner sharing the study with one of
    a larger budget does not wait for that one's search (it decides again, on its larger basis).
    Then the decision lock."""
    store, name, workload_id = run.store, f"decide:{run.workload_id}", run.workload_id
    store.set_run_status(run.run_id, RunStatus.DECIDING)
    while (any(t.config_key in needed for t in store.claimed_elsewhere(workload_id, run.owner))
           or not store.try_lock(name, run.owner, run.settings.lease_s)):
        time.sleep(POLL_S)
    try:
        yield
    finally:
        store.unlock(name, run.owner)


def _basis(trials: list[Trial]) -> tuple[int, ...]:
    """What a decision was taken from: the finished trials, by id."""
    return tuple(sorted(t.id for t in trials if t.status != TrialStatus.RUNNING))


def _decide(run: RunContext, search: SearchLoop, search_load: MachineLoad, searched: list,
            as_called: bool) -> TuneResult:
    store, runner, settings, captured, workload_id = run.store, run.runner, run.settings, run.captured, run.workload_id
    latest = store.latest_result(workload_id)
    basis = _basis(store.trials(workload_id))
    call: dict[str, Any] = dict(trials={}, new_trials=search.new_trials, wall_s=0.0, time_split=TimeSplit(),
                                db=store.where)
    if latest is not None and latest.detail.summary is not None and (
            latest.detail.basis == basis or (search.new_trials == 0 and latest.detail.basis is None)):
        # Nothing was measured since the recorded decision (a rerun, or another tuner of the same
        # study decided on the same trials): it stands.
        recorded = TuneResult.from_decision(latest.detail.summary, **call)
        result = replace(recorded, message=recorded.message + " (recorded)", recorded=True)
    else:
        adoption = finalize(run, as_called)
        notes = [note for stage in searched for note in stage.notes()]
        notes += [f"{len(ids)} decision(s) inactive, they need {needs} which was not searchable "
                  f"then: {', '.join(ids[:3])}{' ...' if len(ids) > 3 else ''}"
                  for needs, ids in search.inactive.items()]
        if search_load.other_cores is not None and search_load.other_cores >= settings.load_threshold_cores:
            notes.append(f"the search ran under load: {search_load.describe()}")
        if runner.budget.widened:  # a chaotic program: say how much its outputs may move
            notes.append(f"verification budget {runner.budget.describe()}")
        best = adoption.best
        result = TuneResult(
            workload=captured.name, fingerprint=captured.fingerprint, default_ms=adoption.default_ms,
            default_ci_ms=adoption.default_ci_ms, best_ms=adoption.best_ms, best_ci_ms=adoption.best_ci_ms,
            speedup=adoption.speedup, speedup_ci=adoption.speedup_ci, adopted=adoption.adopted,
            outcome=adoption.outcome,
            best_config=best.config if adoption.adopted and best else {}, message=adoption.message,
            finalists=adoption.finalists, no_ops=list(search.no_ops), notes=notes,
            confirmation=best.confirmation if best else None, search_load=search_load, **call)
        speedup = (result.speedup, *result.speedup_ci) if result.finalists else None
        deployed = concretize(run.stages, result.best_config)  # {} when nothing was adopted
        pinned = concretize(run.stages, {}).process.autotune_results
        detail = ResultDetail(
            summary=result.decision_json(), verification=runner.budget.to_json(), basis=basis,
            input_dims=captured.dims if deployed.layout else None,  # what xtat.jit places by the adopted layout
            # on GPU: XLA's own choices the run pinned, and the adopted tiles on top of them
            pinned_autotune_results=pinned or "",
            autotune_results=deployed.process.autotune_results or "" if pinned and result.adopted else "")
        store.add_result(workload_id, run.run_id, result.adopted, result.best_config, result.default_ms / 1e3,
                         result.best_ms / 1e3, speedup, detail)
    return result
