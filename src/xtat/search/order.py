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

Both sources are kept per workload so that a run never learns from its own program: the prior's
record of the program being tuned (same fingerprint; for a report's rows, which carry no
fingerprint, the same name) is left out, as its own store's is. A campaign over the gallery and
the suite then measures each program with a prior learned from the others only (leave one out),
and a user's program gets the prior of all of them.
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
SETUP_STAGE = "runtime"  # its decisions set up the process (a `ProcessSetup`): each try starts processes
GLOBAL_STAGES = (SETUP_STAGE, "sharding", "passes", "codegen")
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
class WorkloadWins:
    """One workload's evidence: the decision kinds that won on it and those its searches measured
    (`tried` None: every kind; a campaign report says what won, not what was tried)."""

    name: str
    fingerprint: str  # "" where the source names the workload only (a report's row)
    won: frozenset[str]
    tried: frozenset[str] | None

    def is_program(self, fingerprint: str, name: str) -> bool:
        return self.fingerprint == fingerprint if self.fingerprint else self.name == name

    def to_json(self) -> dict:
        return {"name": self.name, "fingerprint": self.fingerprint, "won": sorted(self.won),
                "tried": None if self.tried is None else sorted(self.tried)}

    @staticmethod
    def from_json(data: object, where: str) -> WorkloadWins:
        """A record read from a file (untrusted): names and kinds are strings, `tried` a list or null."""
        def kinds(value: object) -> bool:
            return isinstance(value, list) and all(isinstance(k, str) for k in value)

        if not isinstance(data, dict) or set(data) != {"name", "fingerprint", "won", "tried"}:
            raise ValueError(f"{where}: each workload must hold exactly name, fingerprint, won and tried")
        name, fingerprint, won, tried = data["name"], data["fingerprint"], data["won"], data["tried"]
        if not isinstance(name, str) or not isinstance(fingerprint, str) or not (name or fingerprint):
            raise ValueError(f"{where}: a workload's name and fingerprint must be strings, one of them set")
        if not kinds(won) or not (tried is None or kinds(tried)):
            raise ValueError(f"{where}: a workload's \"won\" and \"tried\" must be lists of decision kinds")
        return WorkloadWins(name, fingerprint, frozenset(won), None if tried is None else frozenset(tried))


def tally(records: Iterable[WorkloadWins], fingerprint: str | None = None, name: str = "") -> WinCounts:
    """The win counts of `records`, leaving out those of the program `fingerprint`/`name` (None:
    none left out)."""
    wins: Counter[str] = Counter()
    tries: Counter[str] = Counter()
    every = 0  # workloads taken to have tried every kind
    for record in records:
        if fingerprint is not None and record.is_program(fingerprint, name):
            continue
        wins.update(record.won)
        if record.tried is None:
            every += 1
        else:
            tries.update(record.tried | record.won)  # a kind that won was tried, whatever a record says
    return WinCounts(dict(wins), dict(tries), every)


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


def read_prior(data: object, where: str) -> tuple[WorkloadWins, ...]:
    """The per-workload records of a prior file (untrusted): {"workloads": [record, ...]}."""
    if not isinstance(data, dict) or set(data) != {"workloads"} or not isinstance(data["workloads"], list):
        raise ValueError(f"{where}: a prior is {{\"workloads\": [...]}}, a list of per-workload records")
    return tuple(WorkloadWins.from_json(record, where) for record in data["workloads"])


def write_prior(records: Iterable[WorkloadWins]) -> str:
    return json.dumps({"workloads": [r.to_json() for r in records]}, indent=1) + "\n"


def shipped(fingerprint: str | None = None, name: str = "") -> WinCounts:
    """The shipped prior's counts, without the program `fingerprint`/`name`'s own record."""
    return tally(read_prior(json.loads(SHIPPED.read_text()), str(SHIPPED)), fingerprint, name)


def _decisions(config: Config) -> set[str]:
    return {kind(stage, id) for stage, values in config.items() for id in values}


def recorded(stores: Iterable[Storage]) -> list[WorkloadWins]:
    """Per workload in `stores` (see the module's doc), what won and what was tried; a program found
    in several stores (by fingerprint) is one workload."""
    by_fingerprint: dict[str, tuple[str, set[str], set[str]]] = {}
    for store in stores:
        for workload in store.workloads():
            _, won, tried = by_fingerprint.setdefault(workload.fingerprint, (workload.name, set(), set()))
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
    return [WorkloadWins(name, fingerprint, frozenset(won), frozenset(tried))
            for fingerprint, (name, won, tried) in by_fingerprint.items()]


def counted(stores: Iterable[Storage], excluding: str | None = None) -> WinCounts:
    """Win counts of every workload in `stores` but the one whose fingerprint is `excluding`: a run
    learns from other programs, and its own trials must not reorder its own search (a resumed run
    asks what the whole run would have asked)."""
    return tally(recorded(stores), excluding)


def ordered(decisions: Sequence[Decision], counts: WinCounts) -> list[Decision]:
    """Global decisions first, then per-op ones; within each, the kinds that won most often first
    (stable: the stages' own order breaks ties)."""
    return sorted(decisions, key=lambda d: (is_per_op(d), -counts.rate(kind(d.stage, d.id))))
