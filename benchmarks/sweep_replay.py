"""Replay the sweep's global probes on stored runs: when would each winning decision have been
reached, with the process setups kept to their turn (`search/sweep.py: _next_probe`) and in plain
rank order? No program is compiled or timed: each probe costs what its trial cost in the store.

    .venv/bin/python benchmarks/sweep_replay.py STORE.db [STORE.db ...]

Per store (one program's run, e.g. `search_campaign.py --keep K`'s K/PROGRAM/standard.db): the
global decisions its trials changed one at a time, each with the values tried; ranked as a run of
that program ranks them (the shipped prior, the program's own record left out: `search.order`);
the real sweep asked in turn and told each probe's recorded `spent_s` (and, for the plain order,
no cost). Every probe is told the same time, so nothing is combined: what is replayed is the
order of the probes. A winner is a decision whose trial's paired interval lay above 1 + the tie
margin. Prints, per program, the seconds of recorded trials spent when each winner is reached.
Probes the store lacks (the run ended first) cost nothing in the replay.
"""

from __future__ import annotations

import argparse

from xtat.core.errors import StoreError
from xtat.core.space import Config, Decision, config_key
from xtat.core.status import TrialStatus
from xtat.search import make_strategy
from xtat.search.order import GLOBAL_STAGES, TIE_MARGIN, ordered, shipped
from xtat.store.sql import Store

DEFAULT = "<xla-default>"  # the decisions' default here: a value no trial sets


def replay(db: str) -> tuple[str, dict[str, tuple[float | None, float | None]]]:
    """The program's name, and per winning decision the seconds spent when it was reached
    (balanced, plain)."""
    try:
        store = Store.open(db, read_only=True)  # a replay writes nothing, and creates no store where none is
    except StoreError as error:
        raise SystemExit(f"sweep_replay: {error}: give a store that `xtat tune --db` wrote") from None
    try:
        workloads = store.workloads()
        if not workloads:
            raise SystemExit(f"sweep_replay: {db} holds no tuning run: give a store that `xtat tune --db` wrote")
        workload = workloads[0]
        trials = store.trials(workload.id)
    finally:
        store.close()
    spent: dict[str, float] = {}
    won: set[str] = set()
    values: dict[tuple[str, str], list[object]] = {}
    for trial in trials:
        if trial.status not in (TrialStatus.OK, TrialStatus.DUPLICATE) or trial.spent_s is None:
            continue
        changes = [(stage, id, value) for stage, ids in trial.config.items() for id, value in ids.items()]
        if len(changes) != 1 or changes[0][0] not in GLOBAL_STAGES:
            continue
        stage, id, value = changes[0]
        key = config_key(trial.config)
        spent.setdefault(key, trial.spent_s)
        values.setdefault((stage, id), [])
        if value not in values[(stage, id)]:
            values[(stage, id)].append(value)
        if trial.speedup_low is not None and trial.speedup_low > 1.0 + TIE_MARGIN:
            won.add(f"{stage}.{id}")
    decisions = [Decision(stage, id, (DEFAULT, *vals), DEFAULT) for (stage, id), vals in values.items()]
    decisions = ordered(decisions, shipped(workload.fingerprint, workload.name))

    def reached(balanced: bool) -> dict[str, float]:
        strategy = make_strategy("sweep", decisions, seed=0, base={}, canonical=lambda c: c,
                                 searchable=lambda stage, id: True)
        at: dict[str, float] = {}
        clock = 0.0
        for _ in range(len(spent) + 1):
            config: Config | None = strategy.ask()
            if config is None:
                break
            cost = spent.get(config_key(config), 0.0) if config else 0.0
            clock += cost
            for stage, ids in config.items():
                for id in ids:
                    at.setdefault(f"{stage}.{id}", clock)
            strategy.tell(config, 1.0, spent_s=cost if balanced else None)
        return at

    balanced, plain = reached(True), reached(False)
    return workload.name, {kind: (balanced.get(kind), plain.get(kind)) for kind in sorted(won)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stores", nargs="+")
    options = parser.parse_args()
    for db in options.stores:
        name, winners = replay(db)
        shown = ", ".join(f"{kind} at {'-' if b is None else f'{b:.0f} s'} (rank order: "
                          f"{'-' if p is None else f'{p:.0f} s'})" for kind, (b, p) in winners.items())
        print(f"{name}: {shown or 'no decision won alone'}")


if __name__ == "__main__":
    main()
