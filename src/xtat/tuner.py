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

from xtat.errors import UserError
from xtat.model.cost_model import prior
from xtat.model.objectives import OBJECTIVES, pareto_front
from xtat.runner.pool import WorkerFailure
from xtat.runner.session import DEFAULT_ID, Session
from xtat.runner.timing import TimingPolicy, median_ci, speedup_ci
from xtat.search import make_strategy
from xtat.space.space import Config, Decision, Space, config_id, config_key
from xtat.stages.base import STAGE_ORDER, Candidate, Context, concretize
from xtat.store.sqlite import Store, Trial
from xtat.workload import Capture, Workload, capture, export_flat

FORMULATIONS = ("joint", "staged", "alternating")


@dataclass(frozen=True)
class TuneSettings:
    budget: int | None = 40  # configs considered, the default and resumed ones included
    time_s: float | None = None  # wall-clock limit of the search loop
    seed: int = 0
    allow_numerics_change: bool = False
    rtol: float | None = None
    atol: float | None = None
    options: tuple[str, ...] | None = None  # restrict the codegen stage to these XLA options
    stages: tuple[str, ...] = STAGE_ORDER  # the stages whose decisions are searched
    formulation: str = "joint"  # joint | staged | alternating
    strategy: str = "sweep"  # a name in xtat.search.STRATEGIES
    finalists: int = 3
    verify_repeats: int = 3  # checks of a would-be winner on make_inputs(1); one failure demotes it
    # Speedups whose interval reaches into [1, 1 + tie_margin] are ties: two builds of the
    # same code in one worker differ by up to ~1.5% here (code and buffer placement).
    tie_margin: float = 0.02
    impossible_speedup: float = 50.0  # a candidate this much faster than the default is not trusted
    rounds: int = 21  # interleaved rounds when re-measuring finalists
    min_sample_s: float = 0.02
    samples: int = 7
    deadline_factor: float = 10.0  # deadlines are this multiple of the default's times
    min_deadline_s: float = 30.0
    startup_deadline_s: float = 180.0
    # Racing (runner.timing.Race): stop timing a candidate whose fastest of >= race_min_samples
    # samples is above the incumbent's upper interval bound x (1 + race_margin). None: time every sample.
    race_margin: float | None = 0.10
    race_min_samples: int = 3
    objectives: tuple[str, ...] = ("time",)  # with more, the result carries their Pareto front

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
        unknown = [s for s in self.stages if s not in STAGE_ORDER]
        if unknown or not self.stages:
            raise UserError(f"--stages {list(self.stages)}: choose one or more of {', '.join(STAGE_ORDER)}")
        from xtat.search import STRATEGIES

        if self.strategy not in STRATEGIES:
            raise UserError(f"--strategy {self.strategy!r}: choose one of {', '.join(STRATEGIES)}")
        if self.formulation not in FORMULATIONS:
            raise UserError(f"--formulation {self.formulation!r}: choose one of {', '.join(FORMULATIONS)}")
        if not self.objectives or self.objectives[0] != "time" or \
                any(o not in OBJECTIVES for o in self.objectives) or len(set(self.objectives)) < len(self.objectives):
            raise UserError(f"--objectives {','.join(self.objectives)}: start with time, then any of "
                            f"{', '.join(OBJECTIVES[1:])} (adoption is always on run time)")
        if self.race_min_samples < 3 or (self.race_margin is not None and self.race_margin < 0):
            raise UserError("racing needs race_min_samples >= 3 and race_margin >= 0 (or None to turn it off)")

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
    spent_s: float  # the trial's cost: compile, verify and time (recorded cost when resumed)


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
    no_ops: list[str] = field(default_factory=list)  # decisions that never changed the executable
    notes: list[str] = field(default_factory=list)  # e.g. why a stage was left out
    pareto: list[dict] = field(default_factory=list)  # with --objectives beyond time: the non-dominated trials
    history: list[TrialEvent] = field(default_factory=list)  # this run's configs in the order considered

    def to_json(self) -> dict:
        return {
            "workload": self.workload, "fingerprint": self.fingerprint,
            "default_ms": self.default_ms, "default_ci_ms": list(self.default_ci_ms),
            "best_ms": self.best_ms, "best_ci_ms": list(self.best_ci_ms),
            "speedup": self.speedup, "speedup_ci": list(self.speedup_ci), "adopted": self.adopted,
            "trials": self.trials, "best_config": self.best_config, "new_trials": self.new_trials,
            "message": self.message, "wall_s": self.wall_s, "worker_s": self.worker_s, "db": self.db,
            "finalists": self.finalists, "no_ops": self.no_ops, "notes": self.notes, "pareto": self.pareto,
            "history": [asdict(event) for event in self.history],
        }


def _counts(trials: list[Trial]) -> dict[str, int]:
    return dict(sorted(Counter(t.status for t in trials).items()))


def make_stages() -> list:
    """Every stage, in order. Configs are always concretized by all of them, so
    records made with other --stages still build the same candidate."""
    from xtat.stages.codegen import CodegenStage
    from xtat.stages.passes import PassesStage
    from xtat.stages.program.stage import ProgramStage
    from xtat.stages.runtime import RuntimeStage

    runtime, program = RuntimeStage(), ProgramStage()
    return [runtime, program, PassesStage([runtime, program]), CodegenStage()]


def rewritten_exporter(workload: Workload) -> Callable[[dict], bytes]:
    """Exports the workload's program with a set of program-stage rewrites applied."""
    def export(program: dict) -> bytes:
        from xtat.stages.program import rewrite

        return export_flat(rewrite(workload.fn, program), workload.args, workload.kwargs or {})

    return export


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
    folder = Path(tempfile.mkdtemp(prefix="xtat-run-"))
    session = Session(folder, captured.exported, captured.inputs, captured.verify_inputs, rewritten_exporter(workload),
                      settings.startup_deadline_s, settings.deadline_factor, settings.min_deadline_s)
    try:
        return _tune(captured, store, session, settings, started, on_trial)
    finally:
        session.close()
        store.close()
        shutil.rmtree(folder, ignore_errors=True)


class _Search:
    """The search loop shared by every formulation: ask, measure or resume, tell, count."""

    def __init__(self, store: Store, session: Session, workload_id: int, run_id: int, settings: TuneSettings,
                 stages: list, on_trial: Callable[[TrialEvent], None] | None):
        self.store, self.session, self.settings, self.stages = store, session, settings, stages
        self.workload_id, self.run_id, self.on_trial = workload_id, run_id, on_trial
        self.space = Space(())
        self.considered = self.new_trials = 0
        self.used_s = 0.0  # time spent on the trials considered so far, resumed ones included
        self.worker_s = 0.0
        self.best_s: float | None = None
        self.keys: set[str] = set()  # configs considered in this run
        self.history: list[TrialEvent] = []
        self.no_ops: list[str] = []
        self.inactive: dict[str, list[str]] = {}  # requirement -> decisions that could not be active

    def exhausted(self) -> bool:
        s = self.settings
        return (s.budget is not None and self.considered >= s.budget) or (
            s.time_s is not None and self.used_s >= s.time_s)

    def run(self, decisions: list[Decision], base: Config, budget: int | None) -> None:
        """Search `decisions` around `base` for at most `budget` configs (None: until exhausted)."""
        self.space = self.space.extended(decisions)
        known = self.space.by_key()
        # The learned cost model also trains on the store's other workloads.
        cross = prior(self.store, self.workload_id) if self.settings.strategy == "model" else None
        strategy = make_strategy(self.settings.strategy, decisions, seed=self.settings.seed, base=base,
                                 canonical=self.space.canonical, searchable=lambda stage, id: (stage, id) in known,
                                 budget=self.settings.budget, prior=cross)
        for decision in strategy.inactive:
            needs = ", ".join(f"{st}.{i}={v}" for st, i, v in decision.requires)
            self.inactive.setdefault(needs, []).append(f"{decision.stage}.{decision.id}")
        base_hash: str | None = None
        base_config = self.space.canonical(base)
        start = self.considered
        while not self.exhausted() and (budget is None or self.considered - start < budget):
            config = strategy.ask()
            if config is None:
                break
            trial = self.consider(config)
            if config == base_config:
                base_hash = trial.exe_hash
            ok = trial.status in ("ok", "duplicate") and trial.median_s is not None
            same = base_hash is not None and trial.exe_hash == base_hash and config != base_config
            strategy.tell(config, trial.median_s if ok else None, same_as_base=same)
        self.no_ops.extend(n for n in strategy.no_ops if n not in self.no_ops)

    def consider(self, config: Config) -> Trial:
        key = config_key(config)
        recorded = self.store.trial(self.workload_id, key)
        if key in self.keys and recorded is not None:
            return recorded  # already considered in this run (a later stage's base): not counted again
        resumed = recorded is not None and recorded.status != "running"
        if resumed:
            trial = recorded
        else:
            candidate = concretize(self.stages, config)
            trial, spent = _measure(self.store, self.session, self.workload_id, self.run_id, config, candidate,
                                    key, self.settings)
            self.worker_s += spent
            self.new_trials += 1
        assert trial is not None
        self.considered += 1
        self.keys.add(key)
        self.used_s += trial.spent_s or 0.0
        if not config:
            if trial.status != "ok":
                raise UserError(f"the workload fails under the default compile: {trial.status}: {trial.error}")
            self.session.set_deadlines(trial.compile_s or 1.0,
                                       max((trial.worker_s or 0) - (trial.compile_s or 0), 0.1))
        if trial.status in ("ok", "duplicate") and trial.median_s is not None:
            self.best_s = trial.median_s if self.best_s is None else min(self.best_s, trial.median_s)
        event = TrialEvent(self.considered, config, trial.status, trial.median_s, self.best_s, resumed,
                           trial.spent_s or 0.0)
        self.history.append(event)
        if self.on_trial:
            self.on_trial(event)
        return trial

    def best_config(self) -> Config:
        """The fastest verified config considered in this run."""
        trials = [t for t in self.store.trials(self.workload_id)
                  if t.config_key in self.keys and t.status in ("ok", "duplicate") and t.median_s is not None]
        return min(trials, key=lambda t: t.median_s).config if trials else {}  # type: ignore[arg-type, return-value]


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
    context = Context(workload.fn, workload.args, workload.kwargs or {}, identity.env["platform"],
                      settings.allow_numerics_change, settings.options, session.passes_that_ran)
    search = _Search(store, session, workload_id, run_id, settings, stages, on_trial)
    search.consider({})  # the default first, always
    _formulate(search, searched, context, settings)

    latest = store.latest_result(workload_id)
    if search.new_trials == 0 and latest is not None and "summary" in latest.detail:
        # Nothing new was measured: the recorded decision stands (a rerun is a no-op).
        summary = {**latest.detail["summary"], "message": latest.detail["summary"]["message"] + " (recorded)"}
    else:
        summary, spent = _finalize(captured, store, session, workload_id, settings, stages)
        search.worker_s += spent
        summary["no_ops"] = search.no_ops
        summary["notes"] = [f"{stage.name} stage left out: {stage.unavailable}" for stage in searched
                            if getattr(stage, "unavailable", None)]
        summary["notes"] += [f"{len(ids)} decision(s) inactive, they need {needs} which was not searchable "
                             f"then: {', '.join(ids[:3])}{' ...' if len(ids) > 3 else ''}"
                             for needs, ids in search.inactive.items()]
        speedup = (summary["speedup"], *summary["speedup_ci"]) if summary["finalists"] else None
        store.add_result(workload_id, run_id, summary["adopted"], summary["best_config"],
                         summary["default_ms"] / 1e3, summary["best_ms"] / 1e3, speedup, {"summary": summary})
    store.finish_run(run_id, "finished")
    summary = {**summary, "default_ci_ms": tuple(summary["default_ci_ms"]),
               "best_ci_ms": tuple(summary["best_ci_ms"]), "speedup_ci": tuple(summary["speedup_ci"])}
    pareto = pareto_front(store.trials(workload_id), settings.objectives) if len(settings.objectives) > 1 else []
    return TuneResult(**summary, trials=_counts(store.trials(workload_id)), new_trials=search.new_trials,
                      history=search.history, pareto=pareto,
                      wall_s=time.perf_counter() - started, worker_s=search.worker_s, db=str(store.path))


def _formulate(search: _Search, stages: list, context: Context, settings: TuneSettings) -> None:
    """The XTAT-M formulations: how the stages' spaces are derived and searched."""
    if settings.formulation == "joint":
        # One space over every stage, each derived on the default program.
        decisions: list[Decision] = []
        for stage in stages:
            decisions += stage.discover(context, {}, decisions)
        search.run(decisions, {}, None)
        return
    frozen: Config = {}
    rounds = 1 if settings.formulation == "staged" else 1_000
    for round_ in range(rounds):
        before = frozen
        for index, stage in enumerate(stages):
            if search.exhausted():
                return
            # Each stage's space is derived on the program the frozen decisions produce.
            decisions = stage.discover(context, frozen, list(search.space.decisions))
            left = None if settings.budget is None else settings.budget - search.considered
            share = None if left is None else max(1, left // (len(stages) - index))
            if settings.formulation == "alternating" and settings.budget is not None:
                share = max(2, min(share or 2, settings.budget // (2 * len(stages))))
            search.run(decisions, frozen, share)
            frozen = search.best_config()
        if settings.formulation == "alternating" and frozen == before:
            return  # a whole round without improvement


def _measure(store: Store, session: Session, workload_id: int, run_id: int, config: Config, candidate: Candidate,
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
            _discard_after_oom(session, candidate, reply)
            return finish(reply["status"], error=reply.get("error")), spent
        spent += 0.0 if reply.get("cached") else reply["compile_s"]
        compile_s, exe_hash, metrics = reply["compile_s"], reply["exe_hash"], reply.get("metrics") or {}
        same = store.measured_with_hash(workload_id, exe_hash)
        if same is not None:
            worker.request("release", session.compile_deadline_s, ids=[cid])
            return finish(
                "duplicate", compile_s=compile_s, exe_hash=exe_hash, same_as=same.id,
                median_s=same.median_s, ci_low_s=same.ci_low_s, ci_high_s=same.ci_high_s,
                error=None if same.status == "ok" else f"same executable as trial {same.id} ({same.status})",
                worker_s=compile_s, metrics={**metrics, "raced": bool((same.metrics or {}).get("raced"))},
            ), spent
        incumbent_s = None if is_default or settings.race_margin is None else _incumbent_s(store.trials(workload_id))
        race = None if incumbent_s is None else {"incumbent_s": incumbent_s, "margin": settings.race_margin,
                                                 "min_samples": settings.race_min_samples}
        reply = worker.request("measure", session.measure_deadline_s, id=cid, tolerance=settings.tolerance,
                               timing=settings.timing, is_default=is_default, race=race)
        worker.request("release", session.compile_deadline_s, ids=[cid])
        if not reply.get("ok"):
            _discard_after_oom(session, candidate, reply)
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


def _incumbent_s(trials: list[Trial]) -> float | None:
    """What a candidate must race against: the upper interval bound of the fastest fully timed
    trial (its median alone, measured in a quiet moment of a busy machine, raced too many)."""
    timed = [t for t in trials if t.status == "ok" and t.median_s is not None and not (t.metrics or {}).get("raced")]
    best = min(timed, key=lambda t: t.median_s, default=None)  # type: ignore[arg-type, return-value]
    return None if best is None else max(best.median_s, best.ci_high_s or 0.0)  # type: ignore[type-var]


def _discard_after_oom(session: Session, candidate: Candidate, reply: dict) -> None:
    """After an out-of-memory the next candidate starts in a fresh process with all memory free."""
    if reply.get("status") == "oom":
        session.discard(candidate.env)


def _summary(base: dict, best: dict | None, adopted: bool, message: str, finalists: list[dict]) -> dict:
    """The outcome fields of TuneResult; also stored with the result row so a rerun can report it."""
    best = best or {"median_s": base["default_ms"] / 1e3, "ci_s": [x / 1e3 for x in base["default_ci_ms"]],
                    "speedup": 1.0, "speedup_ci": [1.0, 1.0], "config": {}}
    return {**base, "best_ms": best["median_s"] * 1e3, "best_ci_ms": [x * 1e3 for x in best["ci_s"]],
            "speedup": best["speedup"], "speedup_ci": list(best["speedup_ci"]), "adopted": adopted,
            "best_config": best["config"] if adopted else {}, "finalists": finalists, "message": message,
            "no_ops": [], "notes": []}


def _finalize(captured: Capture, store: Store, session: Session, workload_id: int, settings: TuneSettings,
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

    builds = [(DEFAULT_ID, Candidate()), *((config_id(t.config), concretize(stages, t.config)) for t in candidates)]
    start = time.perf_counter()
    try:
        samples = session.interleave(builds, settings.rounds, settings.timing)
    except WorkerFailure as failure:
        message = f"no significant improvement: finalist re-measurement failed ({failure.status}: {failure.error})"
        return _summary(base, None, False, message, []), time.perf_counter() - start
    spent = time.perf_counter() - start
    if DEFAULT_ID not in samples:
        return _summary(base, None, False, "no significant improvement: the default failed to rebuild", []), spent

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
        if m["speedup_ci"][0] <= 1.0 + settings.tie_margin:
            continue  # not faster, or a tie
        if captured.verify_inputs is not None:
            check = _verify_on_second_inputs(session, concretize(stages, m["config"]), m, settings)
            m["verified_on_second_inputs"] = bool(check.get("ok"))
            if not check.get("ok"):
                reason = check.get("mismatch") or check.get("error")
                store.demote_trial(m["trial"], f"failed re-verification on make_inputs(1): {reason}")
                continue
        return _summary(base, m, True, f"adopted: {m['speedup']:.3f}x faster than the default", measured), spent
    top = measured[0] if measured else None
    demoted = sum(m.get("verified_on_second_inputs") is False for m in measured)
    tie = top is not None and top["speedup_ci"][0] > 1.0 and not demoted
    if demoted:
        message = f"no significant improvement: {demoted} faster finalist(s) failed re-verification and were demoted"
    else:
        message = "a tie: faster, but by less than the tie margin" if tie else "no significant improvement"
    message += ": the default stays"
    return _summary(base, top, False, message, measured), spent


def _verify_on_second_inputs(session: Session, candidate: Candidate, finalist: dict,
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
