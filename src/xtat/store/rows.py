"""How a stored row becomes a record: one mapping, shared by the SQLAlchemy store (`sql.py`) and the
standard library's read-only reader (`reader.py`), so both read a row the same way. Imports no
SQLAlchemy."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any, Protocol

from xtat.core.errors import UserError
from xtat.core.status import TrialStatus
from xtat.store.records import TRIAL_FIELDS, Result, ResultDetail, Trial, WorkloadRecord, unpacked_metrics


class Row(Protocol):
    """A stored row read by column name: SQLAlchemy's `RowMapping`, sqlite3's `Row`."""

    def __getitem__(self, key: str, /) -> Any: ...


SCHEMA_VERSION = 7  # 2: trials.metrics, machine; 3: trials.raced; 4: claims (owner, lease) of trials and runs,
#                      trials.node, locks; 5: paired timing (trials.reference_samples, speedup and its interval);
#                      6: profiles and their programs (`xtat profile`); 7: profiled_programs.function, ranges
APPLICATION = "xtat"


def workload_record(m: Row) -> WorkloadRecord:
    return WorkloadRecord(m["id"], m["fingerprint"], m["program"], m["name"], json.loads(m["env"]),
                          json.loads(m["info"]))


UNPACKED = ("mismatches", "lost_nodes")  # fields of a Trial kept in its metrics column (`packed_metrics`)


def trial_record(m: Row) -> Trial:
    values = {f.name: m[f.name] for f in dataclasses.fields(Trial) if f.name not in UNPACKED}
    for field in TRIAL_FIELDS:
        if field.stored_as_json and field.name in values:
            values[field.name] = json.loads(values[field.name]) if values[field.name] else None
    metrics, mismatches, lost_nodes = unpacked_metrics(values.get("metrics"))
    return Trial(**{**values, "status": TrialStatus(values["status"]), "raced": bool(values["raced"]),
                    "metrics": metrics, "mismatches": mismatches, "lost_nodes": lost_nodes})


def result_record(m: Row) -> Result:
    try:
        detail = ResultDetail.from_json(json.loads(m["detail"]))
    except ValueError as exc:  # json's errors are ValueErrors too
        raise UserError(f"result {m['id']} of workload {m['workload_id']} is damaged ({exc}): restore the store "
                        "from a copy or an `xtat export`, or tune again into a new one") from None
    return Result(
        id=m["id"], workload_id=m["workload_id"], run_id=m["run_id"], adopted=bool(m["adopted"]),
        config=json.loads(m["config"]), default_s=m["default_s"], best_s=m["best_s"],
        speedup=m["speedup"], speedup_low=m["speedup_low"], speedup_high=m["speedup_high"],
        detail=detail, created_at=m["created_at"],
    )


def in_force(results: Iterable[Result]) -> Result | None:
    """The decision in force: the newest result made here, or, where none was, the newest imported one
    (`xtat import --prefer-imported` imports results as if made here)."""
    return max(results, key=lambda r: (not r.imported, r.created_at, r.id), default=None)


def run_settings(text: object) -> dict | None:
    """A run's recorded settings (None when absent or not a JSON object)."""
    try:
        settings = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return settings if isinstance(settings, dict) else None
