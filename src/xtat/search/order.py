"""The order in which a search tries decisions: expected gain first, global decisions before per-op ones.

A short budget spent in stage order goes to per-op program decisions (one dot layout after
another, each a full compile) before a pass or a codegen option is ever tried, while most
programs' wins are global decisions. So the decisions are ranked by how often each kind has
won on other programs, and every global decision (runtime, sharding layout, passes, codegen, the
program's declared knobs) comes before any per-op one (a dot's layout, a fusion barrier, a scan's
unroll, a GPU fusion's tile).

How often a kind has won is counted per workload: a win is a workload whose adopted config
holds the decision, or whose search timed a config changing only that decision faster than the
default beyond the tie margin (its paired interval's lower bound); a try is a workload whose
search measured the decision at all. Counts come from two sources, added: the prior shipped with
xtat (`wins.json`, built by `benchmarks/build_prior.py` from the campaigns of the suite and the
gallery: docs/search.md says how) and the stores the run reads (its own store, `--learn-from`).
The rate is (wins + 1) / (tries + 5): a few lucky wins do not outrank many, and a kind never won
ranks below one that has.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from xtat.core.space import Config, Decision
from xtat.core.status import TrialStatus
from xtat.store.base import Storage

SHIPPED = Path(__file__).with_name("wins.json")
GLOBAL_STAGES = ("runtime", "sharding", "passes", "codegen")
TIE_MARGIN = 0.02  # as `tuning.settings.TuneSettings.tie_margin`


def kind(stage: str, id: str) -> str:
    """What wins are counted by: a global decision by its stage and id ("passes.algsimp"); a per-op
    decision by its stage and the kind of op ("program.scan", "program.dot"; "tiles" for a fusion's
    tile); a declared knob by "program.knob"."""
    if stage == "program":
        return "program.knob" if id.startswith("knob:") else f"program.{id.split('@')[0]}"
    return f"{stage}.{id}" if stage in GLOBAL_STAGES else stage


def is_per_op(decision: Decision) -> bool:
    return decision.stage not in GLOBAL_STAGES and not (decision.stage == "program" and decision.id.startswith("knob:"))


@dataclass(frozen=True)
class WinCounts:
    """Per decision kind, how many workloads it won on and how many tried it; `workloads` counts
    workloads whose searches are taken to have tried every kind (a campaign report says what won,
    not what was tried: `benchmarks/build_prior.py`)."""

    wins: Mapping[str, int] = field(default_factory=dict)
    tries: Mapping[str, int] = field(default_factory=dict)
    workloads: int = 0

    def rate(self, kind: str) -> float:
        return (self.wins.get(kind, 0) + 1) / (self.tries.get(kind, 0) + self.workloads + 5)

    def __add__(self, other: WinCounts) -> WinCounts:
        return WinCounts(dict(Counter(self.wins) + Counter(other.wins)),
                         dict(Counter(self.tries) + Counter(other.tries)), self.workloads + other.workloads)

    def to_json(self) -> dict:
        return {"wins": dict(sorted(self.wins.items())), "tries": dict(sorted(self.tries.items())),
                "workloads": self.workloads}

    @staticmethod
    def from_json(data: object, where: str) -> WinCounts:
        """Counts read from a file (untrusted): kinds are strings, counts non-negative integers."""
        def count(value: object) -> bool:
            return isinstance(value, int) and not isinstance(value, bool) and value >= 0

        def counts(name: str) -> dict[str, int]:
            part = data.get(name) if isinstance(data, dict) else None
            if not isinstance(part, dict) or not all(isinstance(k, str) and count(v) for k, v in part.items()):
                raise ValueError(f"{where}: \"{name}\" must map decision kinds to counts")
            return part
        workloads = data.get("workloads") if isinstance(data, dict) else None
        if not isinstance(workloads, int) or not count(workloads):
            raise ValueError(f"{where}: \"workloads\" must be a count")
        return WinCounts(counts("wins"), counts("tries"), workloads)


def shipped() -> WinCounts:
    return WinCounts.from_json(json.loads(SHIPPED.read_text()), str(SHIPPED))


def _decisions(config: Config) -> set[str]:
    return {kind(stage, id) for stage, values in config.items() for id in values}


def counted(stores: Iterable[Storage], excluding: str | None = None) -> WinCounts:
    """Win counts of every workload in `stores` (see the module's doc) but the one whose fingerprint
    is `excluding`: a run learns from other programs, and its own trials must not reorder its own
    search (a resumed run asks what the whole run would have asked)."""
    wins: Counter[str] = Counter()
    tries: Counter[str] = Counter()
    for store in stores:
        for workload in store.workloads():
            if workload.fingerprint == excluding:
                continue
            tried: set[str] = set()
            won: set[str] = set()
            for trial in store.trials(workload.id):
                if trial.status not in (TrialStatus.OK, TrialStatus.DUPLICATE) or not trial.config:
                    continue
                kinds = _decisions(trial.config)
                tried |= kinds
                if len(kinds) == 1 and trial.speedup_low is not None and trial.speedup_low > 1.0 + TIE_MARGIN:
                    won |= kinds
            for result in store.results(workload.id):
                if result.adopted and not result.imported:
                    won |= _decisions(result.config)
            tries.update(tried | won)
            wins.update(won)
    return WinCounts(dict(wins), dict(tries))


def ordered(decisions: Sequence[Decision], counts: WinCounts) -> list[Decision]:
    """Global decisions first, then per-op ones; within each, the kinds that won most often first
    (stable: the stages' own order breaks ties)."""
    return sorted(decisions, key=lambda d: (is_per_op(d), -counts.rate(kind(d.stage, d.id))))
