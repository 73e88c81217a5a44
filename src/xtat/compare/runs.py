"""Runs a comparison campaign: every strategy on every workload with every seed, at one budget.

Each (workload, strategy, seed) run tunes into its own store file, so runs are
independent: in a shared store a later strategy would find the configs an
earlier one measured and take them as resumed, its cost and its luck then
being the earlier strategy's. A finished run leaves a JSON record next to its
store; running the same campaign again reads the records of finished runs and
resumes an unfinished one from its store (`xtat.tune` resumes, and the
strategies are deterministic for a seed, so it continues the same search).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from xtat.capture.targets import load_target
from xtat.capture.workload import Workload
from xtat.compare.analysis import BASELINE, REFERENCE, RunRecord, convergence, incumbents
from xtat.core.errors import UserError
from xtat.stages.order import STAGE_ORDER
from xtat.tuner import TrialEvent, TuneResult, TuneSettings, tune

RECORD_FORMAT = "xtat-compare-run/1"
# The settings a campaign may pass on to every run (measurement effort and deadlines).
TUNING_FIELDS = ("min_sample_s", "samples", "rounds", "min_deadline_s", "deadline_factor")


def available_strategies() -> tuple[str, ...]:
    """Strategy names `xtat compare` accepts: the search strategies, and the baseline
    when the strategy it is made of (`tpe`) exists."""
    from xtat.search import STRATEGIES

    return tuple(STRATEGIES) + ((BASELINE,) if "tpe" in STRATEGIES else ())


@dataclass(frozen=True)
class CampaignPlan:
    targets: tuple[str, ...]  # as for `xtat tune`, `suite:NAME/FORM` included
    strategies: tuple[str, ...]
    budget: int
    seeds: int
    db_dir: Path  # one store and one record per run under it
    stages: tuple[str, ...] = STAGE_ORDER  # searched by every strategy but the baseline (codegen only)
    tuning: Mapping[str, Any] = field(default_factory=dict)  # TUNING_FIELDS overrides
    # REFERENCE's budget (None: `budget`). Its trials to the target count as budget + 1 when
    # not reached; a larger budget measures them instead of bounding them.
    reference_budget: int | None = None

    def __post_init__(self) -> None:
        if not self.targets:
            raise UserError("name at least one TARGET to compare on")
        if not self.strategies:
            raise UserError("--strategies is empty: name one or more of " + ", ".join(available_strategies()))
        available = available_strategies()
        unknown = [s for s in self.strategies if s not in available]
        if unknown:
            raise UserError(f"--strategies: {', '.join(map(repr, unknown))} "
                            f"{'does' if len(unknown) == 1 else 'do'} not exist; available: {', '.join(available)}")
        if len(set(self.strategies)) != len(self.strategies):
            raise UserError("--strategies names a strategy twice; name each once")
        if self.budget < 2:
            raise UserError("--budget must be at least 2 (the default is trial 1)")
        if self.reference_budget is not None and self.reference_budget < self.budget:
            raise UserError(f"--reference-budget ({self.reference_budget}) must be at least --budget "
                            f"({self.budget}): it gives {REFERENCE} more configs, never fewer")
        if self.reference_budget is not None and REFERENCE not in self.strategies:
            raise UserError(f"--reference-budget is the budget of {REFERENCE!r}, which --strategies does not name; "
                            f"add {REFERENCE} or drop --reference-budget")
        if self.seeds < 1:
            raise UserError("--seeds must be at least 1")
        unexpected = [k for k in self.tuning if k not in TUNING_FIELDS]
        if unexpected:
            raise UserError(f"unknown tuning settings {unexpected}; choose from {', '.join(TUNING_FIELDS)}")
        for strategy in self.strategies:
            self.settings(strategy, 0)  # bad --stages or tuning values fail before anything runs

    def settings(self, strategy: str, seed: int, earlier: tuple[str, ...] = ()) -> TuneSettings:
        """The tune settings of one run; the baseline is Optuna TPE over XLA options only.
        `earlier` are the stores of the campaign's runs on the workloads before this one: a
        strategy that learns across workloads (`model`) learns from them, as it would from a
        store the user had tuned those workloads into (never from this workload's runs)."""
        from xtat.search import STRATEGY_CLASSES

        if strategy == BASELINE:
            return TuneSettings(budget=self.budget, seed=seed, strategy="tpe", stages=("codegen",), **self.tuning)
        learn_from = earlier if STRATEGY_CLASSES[strategy].uses_prior else ()
        return TuneSettings(budget=self.budget_for(strategy), seed=seed, strategy=strategy, stages=self.stages,
                            learn_from=learn_from, **self.tuning)

    def budget_for(self, strategy: str) -> int:
        """Configs per run of `strategy`: `budget`, or `reference_budget` for REFERENCE when given."""
        return (self.reference_budget or self.budget) if strategy == REFERENCE else self.budget


@dataclass(frozen=True)
class RunPaths:
    store: Path
    record: Path


def workload_folder(db_dir: Path, workload: str) -> Path:
    """Where a workload's runs (and its re-measurement) are kept."""
    return Path(db_dir) / _slug(workload)


def run_paths(db_dir: Path, workload: str, strategy: str, seed: int) -> RunPaths:
    folder = workload_folder(db_dir, workload)
    stem = f"{_slug(strategy)}-seed{seed}"
    return RunPaths(folder / f"{stem}.db", folder / f"{stem}.json")


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "workload"


def load_workloads(targets: tuple[str, ...]) -> list[Workload]:
    """Each TARGET's workload. Two with the same name would share run folders: those are
    named by their whole TARGET instead, and two TARGETs that are the same are refused."""
    if len(set(targets)) != len(targets):
        twice = ", ".join(t for t in dict.fromkeys(targets) if targets.count(t) > 1)
        raise UserError(f"a TARGET is given twice: {twice}")
    workloads = [load_target(t) for t in targets]
    slugs = [_slug(w.display_name) for w in workloads]
    return [dataclasses.replace(w, name=target) if slugs.count(slug) > 1 else w
            for target, w, slug in zip(targets, workloads, slugs)]


def record_from_result(workload: str, strategy: str, seed: int, result: TuneResult) -> RunRecord:
    """A run's RunRecord from its result."""
    default_s = result.history[0].median_s if result.history else None
    return RunRecord(
        workload=workload, strategy=strategy, seed=seed, curve=convergence(result.history),
        final_speedup=result.speedup, final_speedup_ci=result.speedup_ci, adopted=result.adopted,
        wall_s=result.wall_s, default_s=default_s or 0.0, incumbents=incumbents(result.history),
    )


def _read_record(path: Path, settings: TuneSettings) -> TuneResult | None:
    """The recorded result of a finished run with these settings, else None (run or resume it)."""
    if not path.exists():
        return None
    try:
        document = json.loads(path.read_text())
        if document.get("format") != RECORD_FORMAT or document.get("settings") != _jsonable(asdict(settings)):
            return None
        return TuneResult.from_json(document["result"])
    except (OSError, ValueError, KeyError, AttributeError):  # json's errors are ValueErrors
        return None  # a damaged record: the run resumes from its store and rewrites it


def _write_record(path: Path, workload: str, strategy: str, seed: int, settings: TuneSettings,
                  result: TuneResult) -> None:
    document = {"format": RECORD_FORMAT, "workload": workload, "strategy": strategy, "seed": seed,
                "settings": _jsonable(asdict(settings)), "result": result.to_json()}
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(document, indent=1))
    os.replace(partial, path)  # a killed campaign never leaves a half-written record


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))


@dataclass(frozen=True)
class RunStart:
    """What a progress display learns before each run."""

    index: int  # 1-based over the campaign
    total: int
    workload: str
    strategy: str
    seed: int
    finished_before: bool  # its record exists: nothing is measured
    budget: int  # this run's configs (random's may be larger: `reference_budget`)


def run_campaign(plan: CampaignPlan, on_run: Callable[[RunStart], None] | None = None,
                 on_trial: Callable[[TrialEvent], None] | None = None) -> list[RunRecord]:
    """Run (or read back) every run of the plan; workloads outermost, then seeds, then
    strategies, so that slow drift of the machine spreads over the strategies alike."""
    workloads = load_workloads(plan.targets)
    total = len(workloads) * plan.seeds * len(plan.strategies)
    runs: list[RunRecord] = []
    earlier: list[str] = []  # stores of the runs on the workloads done so far
    for workload in workloads:
        name = workload.display_name
        for seed in range(plan.seeds):
            for strategy in plan.strategies:
                settings = plan.settings(strategy, seed, tuple(earlier))
                paths = run_paths(plan.db_dir, name, strategy, seed)
                recorded = _read_record(paths.record, settings)
                if on_run:
                    on_run(RunStart(len(runs) + 1, total, name, strategy, seed, recorded is not None,
                                    plan.budget_for(strategy)))
                if recorded is None:
                    paths.store.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        result = tune(workload, db=paths.store, settings=settings, on_trial=on_trial)
                    except UserError as exc:
                        raise UserError(f"{name}, {strategy}, seed {seed}: {exc} (finished runs are kept; "
                                        "the same command continues)") from exc
                    _write_record(paths.record, name, strategy, seed, settings, result)
                    recorded = result
                runs.append(record_from_result(name, strategy, seed, recorded))
        stores = [run_paths(plan.db_dir, name, strategy, seed).store
                  for seed in range(plan.seeds) for strategy in plan.strategies]
        earlier += [str(store) for store in stores if store.is_file()]
    return runs


def remeasure_campaign(plan: CampaignPlan, runs: list[RunRecord],
                       on_workload: Callable[[str, int], None] | None = None) -> dict[str, dict[str, float]]:
    """Every workload's incumbents re-measured side by side (`compare.remeasure`), read back
    where recorded; {workload: {config key: speedup}}. `on_workload(name, incumbents)` is
    called before each workload."""
    from xtat.compare.remeasure import incumbent_keys, remeasure, speedups_only

    settings = TuneSettings(seed=0, **plan.tuning)
    speedups: dict[str, dict[str, float]] = {}
    for workload in load_workloads(plan.targets):
        name = workload.display_name
        mine = [r for r in runs if r.workload == name]
        if on_workload:
            on_workload(name, len(incumbent_keys(mine)))
        speedups[name] = speedups_only(remeasure(workload, mine, workload_folder(plan.db_dir, name), settings))
    return speedups
