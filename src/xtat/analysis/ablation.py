"""Ablation of an adopted config: each stage's share of the speedup.

The adopted config is measured interleaved with the default and with each
stage's decisions reverted to default, in fresh workers. A stage's share is
the part of the speedup lost without it, (S_full - S_without) / (S_full - 1);
shares need not sum to 1: stages interact (a fusion barrier needs the passes
stage to disable cse_barrier_expander), and the remainder is reported as
interaction.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from xtat.errors import UserError
from xtat.runner.session import DEFAULT_ID, Session
from xtat.runner.timing import median_ci, speedup_ci
from xtat.stages.base import STAGE_ORDER, Candidate, concretize
from xtat.store.sqlite import Store
from xtat.tuner import TuneSettings, make_stages, rewritten_exporter
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
    stages = make_stages()
    variants = {FULL: config}
    for stage in (s for s in STAGE_ORDER if s in config):
        variants[f"without {stage}"] = {k: v for k, v in config.items() if k != stage}
    folder = Path(tempfile.mkdtemp(prefix="xtat-explain-"))
    session = Session(folder, captured.exported, captured.inputs, None, rewritten_exporter(workload),
                      settings.startup_deadline_s, settings.deadline_factor, settings.min_deadline_s)
    try:
        builds = [(DEFAULT_ID, Candidate())]
        builds += [(name.replace(" ", "_"), concretize(stages, variant)) for name, variant in variants.items()]
        samples = session.interleave(builds, settings.rounds, settings.timing)
    finally:
        session.close()
        shutil.rmtree(folder, ignore_errors=True)
    base = samples[DEFAULT_ID]
    rows = {}
    for name, variant in variants.items():
        key = name.replace(" ", "_")
        if key not in samples:
            rows[name] = {"config": variant, "error": "failed to build"}
            continue
        s, lo, hi = speedup_ci(base, samples[key], seed=settings.seed)
        m, mlo, mhi = median_ci(samples[key], seed=settings.seed)
        rows[name] = {"config": variant, "median_ms": m * 1e3, "ci_ms": [mlo * 1e3, mhi * 1e3],
                      "speedup": s, "speedup_ci": [lo, hi]}
    full = rows[FULL].get("speedup", 1.0)
    shares = {}
    for name, row in rows.items():
        if name != FULL and "speedup" in row and full != 1.0:
            shares[name.removeprefix("without ")] = (full - row["speedup"]) / (full - 1.0)
    d, dlo, dhi = median_ci(base, seed=settings.seed)
    return {"workload": captured.name, "fingerprint": captured.fingerprint, "config": config,
            "default_ms": d * 1e3, "default_ci_ms": [dlo * 1e3, dhi * 1e3], "variants": rows,
            "stage_shares": shares, "interaction": 1.0 - sum(shares.values()) if shares else 0.0,
            "rounds": settings.rounds}
