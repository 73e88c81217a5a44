"""Ablation of an adopted config: each stage's share of the speedup.

The adopted config is measured interleaved with the default and with each
stage's decisions reverted to default, in fresh workers. A stage's share is
the part of the speedup lost without it, (S_full - S_without) / (S_full - 1);
shares need not sum to 1: stages interact (a fusion barrier needs the passes
stage to disable cse_barrier_expander), and the remainder is reported as
interaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xtat.capture.workload import Workload, capture
from xtat.core.errors import UserError
from xtat.core.space import Config
from xtat.stages.order import STAGE_ORDER
from xtat.stages.registry import make_stages
from xtat.store import open_store
from xtat.tuning.session import open_runner
from xtat.tuning.settings import TuneSettings
from xtat.tuning.side_by_side import side_by_side

FULL = "adopted"


@dataclass(frozen=True)
class Variant:
    """The adopted config, or it without one stage's decisions, measured beside the default."""

    config: Config
    median_ms: float | None = None
    ci_ms: tuple[float, float] | None = None
    speedup: float | None = None
    speedup_ci: tuple[float, float] | None = None
    error: str | None = None  # set (and nothing else) when it did not build

    def to_json(self) -> dict[str, Any]:
        if self.error is not None:
            return {"config": self.config, "error": self.error}
        return {"config": self.config, "median_ms": self.median_ms, "ci_ms": list(self.ci_ms or ()),
                "speedup": self.speedup, "speedup_ci": list(self.speedup_ci or ())}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Variant:
        if "error" in data:
            return cls(data["config"], error=data["error"])
        return cls(data["config"], data["median_ms"], tuple(data["ci_ms"]),
                   data["speedup"], tuple(data["speedup_ci"]))


@dataclass(frozen=True)
class Ablation:
    """Each stage's share of an adopted speedup (`xtat explain`)."""

    workload: str
    fingerprint: str
    config: Config
    default_ms: float
    default_ci_ms: tuple[float, float]
    variants: dict[str, Variant]  # "adopted" and "without STAGE" for each stage in the config
    stage_shares: dict[str, float]  # (S_full - S_without) / (S_full - 1), by stage
    interaction: float  # 1 - the sum of the shares
    rounds: int

    def to_json(self) -> dict[str, Any]:
        return {"workload": self.workload, "fingerprint": self.fingerprint, "config": self.config,
                "default_ms": self.default_ms, "default_ci_ms": list(self.default_ci_ms),
                "variants": {name: v.to_json() for name, v in self.variants.items()},
                "stage_shares": self.stage_shares, "interaction": self.interaction, "rounds": self.rounds}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Ablation:
        return cls(data["workload"], data["fingerprint"], data["config"], data["default_ms"],
                   tuple(data["default_ci_ms"]),
                   {name: Variant.from_json(v) for name, v in data["variants"].items()},
                   dict(data["stage_shares"]), data["interaction"], data["rounds"])


def explain(workload: Workload, db: str | Path | None = None, settings: TuneSettings | None = None) -> Ablation:
    settings = settings or TuneSettings()
    captured = capture(workload)
    with open_store(db, read_only=True) as store:
        record = store.workload(captured.fingerprint)
        result = store.latest_result(record.id) if record else None
    if result is None or not result.adopted:
        raise UserError(f"{captured.name}: no adopted config in the store for this program and versions; "
                        "run `xtat tune` first (nothing to explain)")
    config = result.config
    variants = {FULL: config}
    for stage in (s for s in STAGE_ORDER if s in config):
        variants[f"without {stage}"] = {k: v for k, v in config.items() if k != stage}
    with open_runner(captured, settings, verify_inputs=False, prefix="xtat-explain-") as runner:
        measured = side_by_side(runner, make_stages(), variants, settings)
    if measured.default is None:
        why = "the default failed to build" if measured.default_failed else "no variant built"
        raise UserError(f"{captured.name}: {why}; nothing to compare against")
    rows = {}
    for name, m in measured.configs.items():
        f = m.figures
        rows[name] = Variant(m.config, error=m.error) if f is None else \
            Variant(m.config, f.median_s * 1e3, (f.ci_s[0] * 1e3, f.ci_s[1] * 1e3), f.speedup, f.speedup_ci)
    full = rows[FULL].speedup or 1.0
    shares = {}
    for name, row in rows.items():
        if name != FULL and row.speedup is not None and full != 1.0:
            shares[name.removeprefix("without ")] = (full - row.speedup) / (full - 1.0)
    d = measured.default
    return Ablation(captured.name, captured.fingerprint, config, d.median_s * 1e3, (d.ci_s[0] * 1e3, d.ci_s[1] * 1e3),
                    rows, shares, 1.0 - sum(shares.values()) if shares else 0.0, settings.rounds)
