"""The benchmark campaign: tune suite workloads one after another into one store.

Each selected suite entry is tuned in each selected form; an adopted config
is explained (per-stage ablation); every workload is placed on this
machine's roofline. A workload that fails (it does not build, trace or run
under the default compile) becomes an outcome with its error, never a silent
skip. Interrupting and running the same campaign again resumes: a workload
finished before is read back from the campaign file (`bench.json`, written
after every workload) when the store still holds its decision for the same
program, and a workload interrupted midway is tuned again, the store
answering every trial it already finished.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xtat.tuning.result import TuneResult

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from xtat.bench.roofline import MachinePeak, RooflinePlacement, machine_peak, place
from xtat.capture.workload import Workload
from xtat.core import serial
from xtat.core.errors import UserError
from xtat.core.status import TrialStatus
from xtat.store import default_path, open_store
from xtat.suite import FORMS, SIZES, SuiteEntry, entries
from xtat.tuning.ablation import Ablation
from xtat.tuning.result import TrialPoint

CAMPAIGN_FILE = "bench.json"


@dataclass(frozen=True)
class BenchSettings:
    suite: tuple[str, ...] = ()  # suite entry names; empty: all of them
    size: str = "small"
    forms: tuple[str, ...] = FORMS
    budget: int | None = None  # configs per workload and form
    time_per_workload_s: float | None = 60.0  # search time per workload and form
    seed: int = 0
    rounds: int = 21  # interleaved rounds of the finalist re-measurement and of the ablation
    ablation: bool = True
    remeasure_peak: bool = False  # measure the roofline peaks again even if the store has them
    # Timing effort per sample; the tuner's defaults, shortened only by tests.
    samples: int = 7
    min_sample_s: float = 0.02

    def __post_init__(self) -> None:
        if self.size not in SIZES:
            raise UserError(f"--size {self.size!r}: choose one of {', '.join(SIZES)}")
        bad = [f for f in self.forms if f not in FORMS]
        if bad or not self.forms:
            raise UserError(f"--forms {','.join(self.forms)}: choose one or more of {', '.join(FORMS)}")
        if self.budget is None and self.time_per_workload_s is None:
            raise UserError("give --budget or --time-per-workload: a campaign needs a limit per workload")
        if self.budget is not None and self.budget < 1:
            raise UserError("--budget must be at least 1")
        if self.time_per_workload_s is not None and self.time_per_workload_s <= 0:
            raise UserError("--time-per-workload must be positive")
        if self.rounds < 3 or self.samples < 3:
            raise UserError("--rounds and --samples must be at least 3")


@dataclass(frozen=True)
class Outcome:
    """One suite workload in one form: tuned, or the error that stopped it."""

    name: str  # NAME/FORM
    entry: str
    family: str
    form: str
    error: str | None = None  # set when the workload could not be tuned
    fingerprint: str | None = None
    default_ms: float | None = None
    default_ci_ms: tuple[float, float] | None = None
    best_ms: float | None = None  # the best finalist (adopted or not)
    best_ci_ms: tuple[float, float] | None = None
    speedup: float | None = None  # of the best finalist: confirmed through jax.jit when a confirmation ran
    speedup_ci: tuple[float, float] | None = None
    search_speedup: float | None = None  # the confirmed finalist's figure from the search's re-measurement
    search_speedup_ci: tuple[float, float] | None = None
    adopted: bool = False
    message: str = ""
    config: dict = field(default_factory=dict)
    trials: dict[str, int] = field(default_factory=dict)  # every recorded trial by status
    new_trials: int = 0
    wall_s: float = 0.0
    history: tuple[TrialPoint, ...] = ()  # this run's configs in order: time (None: failed), cost
    cost: dict[str, float] = field(default_factory=dict)  # cost analysis of the default program
    ablation: Ablation | None = None  # xtat.tuning.ablation.explain() of the adopted config
    ablation_error: str | None = None
    roofline: RooflinePlacement | None = None
    roofline_left_out: str | None = None  # why the workload is not on the roofline
    read_back: bool = False  # taken from an earlier run of this campaign (bench.json); its decision is in the store

    @classmethod
    def from_json(cls, document: dict) -> Outcome:
        """The inverse of to_json."""
        values = {f.name: document[f.name] for f in fields(cls) if f.name in document}
        for name in ("default_ci_ms", "best_ci_ms", "speedup_ci", "search_speedup_ci"):
            if values.get(name) is not None:
                values[name] = tuple(values[name])
        values["history"] = tuple(_point(event) for event in values.get("history", ()))
        if values.get("roofline"):
            values["roofline"] = RooflinePlacement(**values["roofline"])
        if values.get("ablation"):
            values["ablation"] = Ablation.from_json(values["ablation"])
        return cls(**values)

    @property
    def tuned(self) -> bool:
        return self.error is None

    @property
    def delivered_speedup(self) -> float:
        """What a user gets: the adopted speedup, or 1 when the default stays."""
        return float(self.speedup) if self.adopted and self.speedup else 1.0

    @property
    def tuned_ms(self) -> float | None:
        return self.best_ms if self.adopted else self.default_ms

    def failures(self) -> dict[str, int]:
        return {status: n for status, n in self.trials.items() if not TrialStatus(status).measured}

    def to_json(self) -> dict:
        return {**asdict(self), "ablation": self.ablation.to_json() if self.ablation else None,
                "delivered_speedup": self.delivered_speedup if self.tuned else None}


@dataclass(frozen=True)
class GeometricMean:
    value: float
    low: float  # bootstrap 95% interval over workloads
    high: float
    count: int


@dataclass(frozen=True)
class BenchResult:
    settings: BenchSettings
    outcomes: tuple[Outcome, ...]
    peak: MachinePeak
    peak_measured_now: bool
    delivered: GeometricMean | None  # of delivered speedups over tuned workloads
    best_found: GeometricMean | None  # of the best finalists' speedups, adopted or not
    wall_s: float
    db: str

    def to_json(self) -> dict:
        return {"settings": asdict(self.settings), "db": self.db, "wall_s": self.wall_s,
                "peak": asdict(self.peak), "peak_measured_now": self.peak_measured_now,
                "geomean_delivered": asdict(self.delivered) if self.delivered else None,
                "geomean_best_found": asdict(self.best_found) if self.best_found else None,
                "workloads": [o.to_json() for o in self.outcomes]}


def geometric_mean(values: list[float], seed: int = 0) -> GeometricMean | None:
    """Geometric mean with a BCa bootstrap 95% interval over the values (None for no values).

    The interval is over workloads (which ones were picked), not over timing
    noise; one value, or all values equal, give a zero-width interval.
    """
    if not values:
        return None
    logs = np.log(np.asarray(values, dtype=float))
    value = float(np.exp(logs.mean()))
    if len(logs) < 2 or np.ptp(logs) == 0:
        return GeometricMean(value, value, value, len(logs))
    from scipy.stats import bootstrap

    low, high = math.nan, math.nan
    for method in ("BCa", "percentile"):  # BCa is undefined for some tiny samples: then percentile
        interval = bootstrap((logs,), np.mean, confidence_level=0.95, n_resamples=10_000, method=method,
                             random_state=np.random.default_rng(seed)).confidence_interval
        low, high = float(interval.low), float(interval.high)
        if math.isfinite(low) and math.isfinite(high):
            break
    return GeometricMean(value, min(float(np.exp(low)), value), max(float(np.exp(high)), value), len(logs))


def select(settings: BenchSettings) -> list[tuple[SuiteEntry, str]]:
    """The (entry, form) pairs of the campaign, in suite order."""
    known = entries()
    unknown = [name for name in settings.suite if name not in known]
    if unknown:
        raise UserError(f"--suite: no suite workload {', '.join(map(repr, unknown))}; `xtat suite list` shows "
                        f"the {len(known)} there are (or pass --suite all)")
    chosen = [known[name] for name in settings.suite] if settings.suite else list(known.values())
    return [(entry, form) for entry in chosen for form in settings.forms]


# Settings that change what a workload's tuning measures: an earlier outcome is reused only if they match.
MEASUREMENT_SETTINGS = ("size", "budget", "time_per_workload_s", "seed", "rounds", "samples", "min_sample_s")


def earlier_outcomes(report_dir: Path | None, settings: BenchSettings) -> dict[str, Outcome]:
    """Tuned outcomes of an earlier (maybe interrupted) campaign with the same measurement
    settings, by NAME/FORM, read from REPORT_DIR/bench.json."""
    path = report_dir / CAMPAIGN_FILE if report_dir else None
    if path is None or not path.is_file():
        return {}
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError:
        return {}  # an unreadable earlier file only costs re-running
    earlier = document.get("settings", {})
    if any(earlier.get(name) != getattr(settings, name) for name in MEASUREMENT_SETTINGS):
        return {}
    return {w["name"]: Outcome.from_json(w) for w in document.get("workloads", [])
            if w.get("error") is None and w.get("fingerprint")}


def still_decided(workload: Workload, earlier: Outcome, db: Path) -> bool:
    """Whether the store still holds `earlier`'s decision for this very program and versions."""
    from xtat.capture.workload import capture

    fingerprint = capture(workload).fingerprint
    if fingerprint != earlier.fingerprint or not db.exists():
        return False
    store = open_store(db, read_only=True)
    try:
        record = store.workload(fingerprint)
        result = store.latest_result(record.id) if record else None
    finally:
        store.close()
    return result is not None and result.adopted == earlier.adopted and \
        (result.config if result.adopted else {}) == earlier.config


def tune_entry(entry: SuiteEntry, form: str, settings: BenchSettings, db: Path, peak: MachinePeak,
               earlier: Outcome | None = None, on_trial: Callable | None = None) -> Outcome:
    """One workload of the campaign: tune it, explain an adopted config, place it on the roofline.

    `earlier` is this workload's outcome in an interrupted campaign with the same settings: when the
    store still holds its decision for the same program, it is taken as is (a re-tune would read
    every trial back, but still start a worker to list the HLO passes: seconds per workload).
    """
    from xtat.tuner import TuneSettings, tune
    from xtat.tuning.ablation import explain

    name = f"{entry.name}/{form}"
    base: dict[str, Any] = {"name": name, "entry": entry.name, "family": entry.family, "form": form}
    tune_settings = TuneSettings(budget=settings.budget, time_s=settings.time_per_workload_s, seed=settings.seed,
                                 rounds=settings.rounds, samples=settings.samples,
                                 min_sample_s=settings.min_sample_s)
    started = time.perf_counter()
    # A campaign outlives any one workload's bug: whatever a workload raises (building
    # the model, tracing, the default failing) is its recorded outcome and the campaign goes on.
    try:
        workload = entry.workload(form, settings.size)
        if earlier is not None and still_decided(workload, earlier, db):
            outcome = replace(earlier, read_back=True, wall_s=time.perf_counter() - started)
        else:
            outcome = _tuned(base, tune(workload, db=db, settings=tune_settings, on_trial=on_trial), db)
    except UserError as exc:
        return Outcome(**base, error=str(exc), wall_s=time.perf_counter() - started)
    except Exception as exc:  # noqa: BLE001 - see above
        return Outcome(**base, error=f"{type(exc).__name__}: {exc}", wall_s=time.perf_counter() - started)

    ablation, ablation_error = outcome.ablation, None
    if outcome.adopted and settings.ablation and ablation is None:
        try:
            ablation = explain(workload, db=db, settings=tune_settings)
        except Exception as exc:  # noqa: BLE001 - an ablation failure must not lose the tuning result
            ablation_error = f"{type(exc).__name__}: {exc}"
    assert outcome.default_ms is not None and outcome.tuned_ms is not None
    roofline, left_out = place(peak, outcome.cost, outcome.default_ms / 1e3, outcome.tuned_ms / 1e3)
    return replace(outcome, ablation=ablation, ablation_error=ablation_error, wall_s=time.perf_counter() - started,
                   roofline=roofline, roofline_left_out=left_out)


def _tuned(base: dict, result: TuneResult, db: Path) -> Outcome:
    """The outcome of a TuneResult, with the default program's cost analysis from the store."""
    confirmed = result.confirmed
    store = open_store(db, read_only=True)
    try:
        record = store.workload(result.fingerprint)
        cost = dict(record.info.get("cost", {})) if record else {}
    finally:
        store.close()
    return Outcome(
        **base, fingerprint=result.fingerprint, default_ms=result.default_ms, default_ci_ms=result.default_ci_ms,
        best_ms=result.best_ms, best_ci_ms=result.best_ci_ms, speedup=result.speedup, speedup_ci=result.speedup_ci,
        search_speedup=confirmed.search_speedup if confirmed else None,
        search_speedup_ci=confirmed.search_speedup_ci if confirmed else None,
        adopted=result.adopted, message=result.message, config=result.best_config, trials=result.trials,
        new_trials=result.new_trials,
        history=tuple(TrialPoint(e.median_s if e.status.measured else None, e.spent_s) for e in result.history),
        cost=cost,
    )


def _point(event: dict) -> TrialPoint:
    """A recorded history event (bench.json); campaigns before TrialPoints wrote the trial's status too."""
    if "status" in event:  # an earlier campaign's event: a failed trial's time is no time
        event = {"median_s": event["median_s"] if TrialStatus(event["status"]).measured else None,
                 "spent_s": event.get("spent_s") or 0.0}
    return serial.load(TrialPoint, event)


def run_bench(settings: BenchSettings, db: str | Path | None = None, report_dir: str | Path | None = None,
              on_workload: Callable[[int, int, str], None] | None = None,
              on_outcome: Callable[[Outcome], None] | None = None,
              on_trial: Callable | None = None) -> BenchResult:
    """Run the campaign. After each workload the campaign so far is written to
    REPORT_DIR/bench.json (when given), which a re-run with the same settings resumes from.

    on_workload(index, total, name) is called before each workload, on_outcome
    after it, on_trial with each of its TrialEvents.
    """
    started = time.perf_counter()
    pairs = select(settings)
    path = Path(db) if db is not None else default_path()
    folder = Path(report_dir) if report_dir is not None else None
    store = open_store(path)
    try:
        # Measured before any tuning, with nothing else of the tuner running.
        peak, measured_now = machine_peak(store, settings.remeasure_peak)
    finally:
        store.close()
    earlier = earlier_outcomes(folder, settings)
    outcomes: list[Outcome] = []
    for index, (entry, form) in enumerate(pairs, start=1):
        if on_workload:
            on_workload(index, len(pairs), f"{entry.name}/{form}")
        outcome = tune_entry(entry, form, settings, path, peak, earlier.get(f"{entry.name}/{form}"), on_trial)
        outcomes.append(outcome)
        if on_outcome:
            on_outcome(outcome)
        result = _result(settings, outcomes, peak, measured_now, started, path)
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / CAMPAIGN_FILE).write_text(json.dumps(result.to_json(), indent=1))
    return _result(settings, outcomes, peak, measured_now, started, path)


def _result(settings: BenchSettings, outcomes: list[Outcome], peak: MachinePeak, measured_now: bool,
            started: float, db: Path) -> BenchResult:
    tuned = [o for o in outcomes if o.tuned]
    return BenchResult(settings, tuple(outcomes), peak, measured_now,
                       geometric_mean([o.delivered_speedup for o in tuned], settings.seed),
                       geometric_mean([o.speedup or 1.0 for o in tuned], settings.seed),
                       time.perf_counter() - started, str(db))
