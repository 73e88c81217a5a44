"""Validation of `xtat export` documents before `xtat import` writes anything.

Strict by design: every field has a known name and JSON type, so no payload
of another kind (a pickle, code) can ride along; nothing is ever unpickled.
"""

from __future__ import annotations

import math
from typing import Any

from xtat.capture.workload import fingerprint
from xtat.core.errors import UserError
from xtat.store.records import ResultDetail

_RESULT_FIELDS: dict[str, tuple[type, ...]] = {
    "adopted": (bool,), "config": (dict,), "default_s": (int, float, type(None)),
    "best_s": (int, float, type(None)), "speedup": (int, float, type(None)),
    "speedup_low": (int, float, type(None)), "speedup_high": (int, float, type(None)),
    "detail": (dict,), "created_at": (int, float), "run_settings": (dict, type(None)),
}
_WORKLOAD_FIELDS: dict[str, tuple[type, ...]] = {
    "fingerprint": (str,), "program": (str,), "name": (str,), "env": (dict,), "info": (dict,),
    "trials": (list,), "results": (list,),
}


def _check_fields(where: str, record: Any, fields: dict[str, tuple[type, ...]], optional: set[str]) -> None:
    if not isinstance(record, dict):
        raise UserError(f"import: {where} must be a JSON object")
    unknown = set(record) - set(fields)
    if unknown:
        raise UserError(f"import: {where} has unknown field(s) {sorted(unknown)}; nothing was imported")
    for name, types in fields.items():
        if name not in record:
            if name in optional:
                continue
            raise UserError(f"import: {where} lacks field {name!r}; nothing was imported")
        value = record[name]
        if isinstance(value, bool) and bool not in types:
            raise UserError(f"import: {where}.{name} must be {types[0].__name__}, got a bool")
        if not isinstance(value, types):
            raise UserError(f"import: {where}.{name} must be {types[0].__name__}, got {type(value).__name__}")
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"import: {where}.{name} is not a finite number")


def _check_config(where: str, config: dict) -> None:
    for stage, decisions in config.items():
        if not isinstance(decisions, dict):
            raise UserError(f"import: {where}.config[{stage!r}] must be an object of decisions")
        for decision_id, value in decisions.items():
            if not isinstance(value, (bool, int, float, str)):
                raise UserError(f"import: {where}.config[{stage!r}][{decision_id!r}] must be a JSON scalar")


def _vet_adopted(where: str, workload: dict, result: dict) -> None:
    """An adopted result is imported only if it would be applied: vetted, and backed by a verified trial."""
    from xtat.store.vetting import refusals

    found = refusals(result["config"], str(workload["env"].get("platform", "")), result.get("run_settings"),
                     [(t["config_key"], t["status"]) for t in workload["trials"]])
    if found:
        raise UserError(f"import: {where} ({workload['name']!r}) adopts a config that is refused: "
                        f"{'; '.join(found)}; nothing was imported")


def validate_export(document: Any) -> list[dict]:
    from xtat.core.space import config_key
    from xtat.core.status import FINAL_STATUSES
    from xtat.store.records import TRIAL_FIELDS
    from xtat.store.schema import SCHEMA_VERSION

    trial_fields = {f.name: f.kinds for f in TRIAL_FIELDS if f.exported}
    optional = {f.name for f in TRIAL_FIELDS if f.exported and not f.required}

    if not isinstance(document, dict) or document.get("xtat_export") != 1:
        raise UserError("import: not an xtat export document (missing \"xtat_export\": 1)")
    if not isinstance(document.get("schema_version"), int) or document["schema_version"] > SCHEMA_VERSION:
        raise UserError(f"import: schema_version {document.get('schema_version')!r} is not one this xtat reads "
                        f"(<= {SCHEMA_VERSION}); upgrade xtat")
    workloads = document.get("workloads")
    if not isinstance(workloads, list):
        raise UserError("import: \"workloads\" must be a list")
    for i, workload in enumerate(workloads):
        where = f"workloads[{i}]"
        _check_fields(where, workload, _WORKLOAD_FIELDS, set())
        for j, trial in enumerate(workload["trials"]):
            at = f"{where}.trials[{j}]"
            _check_fields(at, trial, trial_fields, optional)
            if trial["status"] not in FINAL_STATUSES:
                raise UserError(f"import: {at}.status {trial['status']!r} is not one of {list(FINAL_STATUSES)}")
            _check_config(at, trial["config"])
            if config_key(trial["config"]) != trial["config_key"]:
                raise UserError(f"import: {at}.config_key does not match its config")
            for name in ("samples", "reference_samples"):
                if trial.get(name) is not None and not all(
                    isinstance(s, (int, float)) and not isinstance(s, bool) for s in trial[name]
                ):
                    raise UserError(f"import: {at}.{name} must be numbers")
        for j, result in enumerate(workload["results"]):
            at = f"{where}.results[{j}]"
            _check_fields(at, result, _RESULT_FIELDS, {"default_s", "best_s", "speedup", "speedup_low",
                                                        "speedup_high", "detail", "run_settings"})
            _check_config(at, result["config"])
            try:
                ResultDetail.from_json(result.get("detail"))
            except ValueError as exc:
                raise UserError(f"import: {at}.detail is malformed ({exc}); nothing was imported") from None
            if result["adopted"]:
                _vet_adopted(at, workload, result)
        if fingerprint(workload["program"], workload["env"]) != workload["fingerprint"]:
            raise UserError(f"import: {where}.fingerprint is not the key of its program and environment "
                            f"({workload['name']!r} claims {workload['env']}); nothing was imported")
    return workloads
