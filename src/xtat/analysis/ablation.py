"""Ablation of an adopted config: each stage's share of the speedup.

The adopted config is measured interleaved with the default and with each
stage's decisions reverted to default, in fresh workers. A stage's share is
the part of the speedup lost without it, (S_full - S_without) / (S_full - 1);
shares need not sum to 1: stages interact (a fusion barrier needs the passes
stage to disable cse_barrier_expander), and the remainder is reported as
interaction.
"""

from __future__ import annotations

from pathlib import Path

from xtat.errors import UserError
from xtat.stages.base import STAGE_ORDER
from xtat.store.sqlite import Store
from xtat.tuning.session import make_stages, open_session
from xtat.tuning.settings import TuneSettings
from xtat.tuning.side_by_side import side_by_side
from xtat.workload import Workload, capture

FULL = "adopted"


def explain(workload: Workload, db: str | Path | None = None, settings: TuneSettings | None = None) -> dict:
    settings = settings or TuneSettings()
    captured = capture(workload)
    store = Store.open(db, read_only=True)
    try:
        record = store.workload(captured.fingerprint)
        result = store.latest_result(record.id) if record else None
    finally:
        store.close()
    if result is None or not result.adopted:
        raise UserError(f"{captured.name}: no adopted config in the store for this program and versions; "
                        "run `xtat tune` first (nothing to explain)")
    config = result.config
    variants = {FULL: config}
    for stage in (s for s in STAGE_ORDER if s in config):
        variants[f"without {stage}"] = {k: v for k, v in config.items() if k != stage}
    with open_session(captured, settings, verify_inputs=False, prefix="xtat-explain-") as session:
        measured = side_by_side(session, make_stages(), variants, settings)
    if measured.default is None:
        raise UserError(f"{captured.name}: the default failed to build; nothing to compare against")
    rows = {}
    for name, m in measured.configs.items():
        rows[name] = {"config": m.config, "error": m.error} if m.error else {
            "config": m.config, "median_ms": m.median_s * 1e3, "ci_ms": [x * 1e3 for x in m.ci_s],  # type: ignore
            "speedup": m.speedup, "speedup_ci": list(m.speedup_ci)}  # type: ignore[arg-type]
    full = rows[FULL].get("speedup", 1.0)
    shares = {}
    for name, row in rows.items():
        if name != FULL and "speedup" in row and full != 1.0:
            shares[name.removeprefix("without ")] = (full - row["speedup"]) / (full - 1.0)
    d = measured.default
    return {"workload": captured.name, "fingerprint": captured.fingerprint, "config": config,
            "default_ms": d.median_s * 1e3, "default_ci_ms": [x * 1e3 for x in d.ci_s],  # type: ignore
            "variants": rows,
            "stage_shares": shares, "interaction": 1.0 - sum(shares.values()) if shares else 0.0,
            "rounds": settings.rounds}
