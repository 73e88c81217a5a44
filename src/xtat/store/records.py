"""The records a store holds, as every backend returns them: frozen dataclasses, JSON inside.

`TRIAL_FIELDS` is the one list of a trial's recorded fields: `finish_trial`, the export
document, the import and its validation all follow it (tests/test_store.py checks that it
matches the schema and `Trial`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xtat.core import serial
from xtat.core.status import FINAL_STATUSES, TrialStatus


@dataclass(frozen=True)
class Trial:
    id: int
    workload_id: int
    run_id: int | None
    config: dict
    status: TrialStatus
    error: str | None
    compile_s: float | None
    exe_hash: str | None
    median_s: float | None
    ci_low_s: float | None
    ci_high_s: float | None
    samples: list | None
    max_abs_err: float | None
    max_rel_err: float | None
    same_as: int | None
    worker_s: float | None
    spent_s: float | None
    created_at: float
    metrics: dict | None = None  # compile-time facts: peak memory, cost analysis, HLO features
    raced: bool = False  # timing stopped early: clearly slower than the incumbent (a few samples only)
    node: str | None = None  # where it was measured (a host name, or a Ray node)
    # Paired timing (`runner.timing.paired`): the reference's sample beside each of `samples`, and
    # the default's time over this trial's, median of the pairs' ratios with its 95% interval.
    reference_samples: list | None = None
    speedup: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    # Kept in the metrics column, apart from the compile-time facts (`packed_metrics`):
    mismatches: tuple[dict[str, Any], ...] = ()  # a wrong_result's failed rules: which, where, by how much
    lost_nodes: tuple[str, ...] = ()  # machines that died measuring it, each followed by a retry elsewhere

    @property
    def config_key(self) -> str:
        from xtat.core.space import config_key

        return config_key(self.config)

    @property
    def search_pairs(self) -> int | None:
        """How many of `samples` the search timed, where a shortlist's re-timing added its block after
        them (`Storage.retime_trial`); None: all of them. Read from the metrics column (untrusted)."""
        count = (self.metrics or {}).get("search_pairs")
        return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else None


def packed_metrics(metrics: dict[str, Any] | None, mismatches: tuple[dict[str, Any], ...] | list,
                   lost_nodes: tuple[str, ...] | list) -> dict[str, Any] | None:
    """The metrics column: the compile-time facts, with a failure's mismatches and lost nodes beside them."""
    extra = {**({"mismatches": list(mismatches)} if mismatches else {}),
             **({"lost_nodes": list(lost_nodes)} if lost_nodes else {})}
    return {**(metrics or {}), **extra} if metrics is not None or extra else None


def unpacked_metrics(column: dict[str, Any] | None) -> tuple[dict[str, Any] | None, tuple, tuple]:
    """The inverse of `packed_metrics`: (compile-time facts, mismatches, lost nodes)."""
    if column is None:
        return None, (), ()
    facts = {k: v for k, v in column.items() if k not in ("mismatches", "lost_nodes")}
    return facts, tuple(column.get("mismatches") or ()), tuple(column.get("lost_nodes") or ())


@dataclass(frozen=True)
class Timing:
    """A measured config's times."""

    median_s: float
    ci_s: tuple[float, float] | None = None  # the median's 95% interval
    samples: tuple[float, ...] | None = None
    # Paired timing (`runner.timing.paired`): the reference's sample beside each of `samples`, and
    # the default's time over this config's (median of the pairs' ratios, its 95% interval).
    reference_samples: tuple[float, ...] | None = None
    speedup: tuple[float, float, float] | None = None  # median, low, high

    def columns(self) -> dict[str, Any]:
        """The trial row's timing columns."""
        ci, speedup = self.ci_s or (None, None), self.speedup or (None, None, None)
        return {"median_s": self.median_s, "ci_low_s": ci[0], "ci_high_s": ci[1],
                "samples": None if self.samples is None else list(self.samples),
                "reference_samples": None if self.reference_samples is None else list(self.reference_samples),
                "speedup": speedup[0], "speedup_low": speedup[1], "speedup_high": speedup[2]}


@dataclass(frozen=True)
class TrialOutcome:
    """How a trial ended, as its measurement hands it to the store (`Storage.finish_trial`): its
    `timing` is there exactly when it was timed (ok; a duplicate reusing its twin's times)."""

    status: TrialStatus
    error: str | None = None
    compile_s: float | None = None
    exe_hash: str | None = None
    timing: Timing | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    same_as: int | None = None  # a duplicate's twin
    worker_s: float | None = None
    spent_s: float | None = None  # the trial's wall time (compile, verify, time)
    metrics: dict[str, Any] | None = None  # compile-time facts: peak memory, cost analysis, HLO features
    mismatches: tuple[dict[str, Any], ...] = ()
    lost_nodes: tuple[str, ...] = ()
    raced: bool = False
    node: str | None = None

    def __post_init__(self) -> None:
        status = TrialStatus(self.status)
        if status not in FINAL_STATUSES:
            raise ValueError(f"a trial cannot end as {status!r}")
        if status is TrialStatus.OK and self.timing is None:
            raise ValueError("an ok trial has its timing")
        if not status.measured and self.timing is not None:
            raise ValueError(f"a {status.value} trial has no timing")

    def columns(self) -> dict[str, Any]:
        """The trial row's columns, as the store writes them (JSON columns as data)."""
        timing = self.timing.columns() if self.timing else dict.fromkeys(Timing(0.0).columns())
        return {"status": TrialStatus(self.status).value, "error": self.error, "compile_s": self.compile_s,
                "exe_hash": self.exe_hash, **timing, "max_abs_err": self.max_abs_err,
                "max_rel_err": self.max_rel_err, "same_as": self.same_as, "worker_s": self.worker_s,
                "spent_s": self.spent_s, "metrics": packed_metrics(self.metrics, self.mismatches, self.lost_nodes),
                "raced": self.raced, "node": self.node}


_NUMBER = (int, float, type(None))


@dataclass(frozen=True)
class Field:
    """One recorded field of a trial: its JSON types in an export document, and where it goes."""

    name: str
    kinds: tuple[type, ...]  # JSON types an export document may give it (checked on import)
    stored_as_json: bool = False  # a JSON text column
    exported: bool = True  # ids of this store (same_as) do not travel
    required: bool = False  # an export document must have it


TRIAL_FIELDS = (
    Field("config", (dict,), stored_as_json=True, required=True),
    Field("config_key", (str,), required=True),
    Field("status", (str,), required=True),
    Field("error", (str, type(None))),
    Field("compile_s", _NUMBER),
    Field("exe_hash", (str, type(None))),
    Field("median_s", _NUMBER),
    Field("ci_low_s", _NUMBER),
    Field("ci_high_s", _NUMBER),
    Field("samples", (list, type(None)), stored_as_json=True),
    Field("max_abs_err", _NUMBER),
    Field("max_rel_err", _NUMBER),
    Field("same_as", (int, type(None)), exported=False),
    Field("worker_s", _NUMBER),
    Field("spent_s", _NUMBER),
    Field("created_at", (int, float), required=True),
    Field("metrics", (dict, type(None)), stored_as_json=True),
    Field("raced", (bool,)),
    Field("node", (str, type(None))),
    Field("reference_samples", (list, type(None)), stored_as_json=True),
    Field("speedup", _NUMBER),
    Field("speedup_low", _NUMBER),
    Field("speedup_high", _NUMBER),
)
TRIAL_FIELD = {f.name: f for f in TRIAL_FIELDS}
# Trial columns that are the store's own bookkeeping, not a recorded field: ids, and the claim
# (which tuner measures a running trial, and until when its lease holds without a heartbeat).
BOOKKEEPING = frozenset({"id", "workload_id", "run_id", "finished_at", "owner", "lease_until"})


@dataclass(frozen=True)
class WorkloadRecord:
    id: int
    fingerprint: str
    program: str
    name: str
    env: dict
    info: dict


@dataclass(frozen=True)
class Rejection:
    """An adopted config this XLA refused when it was applied (`xtat.jit`, `xtat run`)."""

    reason: str
    env: dict[str, str]
    at: float


@dataclass(frozen=True)
class ResultDetail:
    """What a result row records beside its figures (the `detail` JSON column)."""

    # The run's decision as the tuner reports it (`tuning.result.TuneResult.decision_json`): opaque
    # here, read back by the tuning role, so that a rerun reports the recorded decision.
    summary: dict[str, Any] | None = None
    verification: dict[str, Any] | None = None  # the verification budget (`runner.verify.Budget.to_json`)
    basis: tuple[int, ...] | None = None  # the finished trials the decision was taken from
    input_dims: list[Any] | None = None  # the workload's declared dimension names: what a layout places
    pinned_autotune_results: str = ""  # on GPU: XLA's own tile choices the run pinned
    autotune_results: str = ""  # ... and the adopted tiles on top of them
    rejected_at_apply: tuple[Rejection, ...] = ()
    imported: bool = False  # written by `xtat import` (a local decision wins over it)
    note: str = ""  # what a result that is not a tuning run's decision is (a script's runtime decision)

    def to_json(self) -> dict[str, Any]:
        return serial.dump(self)

    @classmethod
    def from_json(cls, data: Any) -> ResultDetail:
        """Read back (a stored or imported document: untrusted); ValueError names what is wrong."""
        if isinstance(data, dict) and isinstance(data.get("summary"), str):
            # Stores of schema 7 and before wrote a script's runtime decision with its note as the summary.
            data = {**data, "summary": None, "note": data["summary"]}
        return serial.load(cls, data or {})


@dataclass(frozen=True)
class Result:
    id: int
    workload_id: int
    run_id: int | None
    adopted: bool
    config: dict
    default_s: float | None
    best_s: float | None
    speedup: float | None
    speedup_low: float | None
    speedup_high: float | None
    detail: ResultDetail
    created_at: float

    @property
    def imported(self) -> bool:
        return self.detail.imported


@dataclass(frozen=True)
class ImportReport:
    added: dict[str, int]  # rows written, by table
    skipped: tuple[str, ...]  # what was not written or is not in force, and why


def trial_json(t: Trial) -> dict:
    values = {f.name: getattr(t, f.name) for f in TRIAL_FIELDS if f.exported}
    return {**values, "metrics": packed_metrics(t.metrics, t.mismatches, t.lost_nodes)}


def result_json(r: Result) -> dict:
    return {
        "adopted": r.adopted, "config": r.config, "default_s": r.default_s, "best_s": r.best_s,
        "speedup": r.speedup, "speedup_low": r.speedup_low, "speedup_high": r.speedup_high,
        "detail": r.detail.to_json(), "created_at": r.created_at,
    }


@dataclass(frozen=True)
class ProfileRecord:
    """One profiled run of a script (`xtat profile`)."""

    id: int
    name: str
    command: list[str]
    cwd: str
    env: dict
    complete: bool  # exit status 0 and every program recorded; an incomplete profile is never tuned
    exit_code: int
    wall_s: float
    notes: list[str]
    created_at: float


@dataclass(frozen=True)
class ProfiledProgram:
    """One program a profiled script compiled, with its share of the script's time."""

    fingerprint: str
    program: str
    name: str
    avals: list[dict]
    calls: int
    run_s: float
    compile_s: float
    share: float
    exported: bytes | None = None  # hot programs: what the tuner compiles
    inputs: bytes | None = None  # .npz of its first call's inputs; None: seeded inputs (`inputs_note` says why)
    inputs_note: str = ""
    not_tunable: str = ""  # why a hot program has no `exported`
    function: str = ""  # the Python function it was traced from: a function's signatures are tuned as one
    ranges: list[tuple[float, float] | None] | None = None  # per input, seeded inputs' ranges (`inputs` None)
