"""Where an `xtat compare` campaign's trials went, read from its run folder.

    .venv/bin/python benchmarks/campaign_stats.py DIR [--json]

DIR is an `xtat compare --db DIR` folder (one folder of run stores and records per
workload). Nothing is measured. Per workload it prints:

- duplicate trials per strategy and seed (configs that rebuilt an executable an
  earlier trial of the run had built: trials of the budget that measured nothing new);
- for each strategy, how far each duplicate was from the nearest earlier config with
  the same executable (in decisions), and the decisions that differed most often;
- where the incumbents were re-measured (`remeasured.json`): for each run whose final
  config is among them, its re-measured speedup / the run's own final speedup, whose
  median near 1 says the two measurements agree.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from pathlib import Path

from xtat.core.space import config_key
from xtat.store.sql import Store


def _flat(config: dict) -> dict[str, object]:
    return {f"{stage}.{id}": value for stage, values in config.items() for id, value in values.items()}


def duplicate_distances(store_path: Path) -> tuple[list[int], Counter[str]]:
    """For each duplicate trial, the decisions by which it differs from the nearest earlier
    trial with its executable; (their counts, how often each decision was among them)."""
    store = Store.open(store_path, read_only=True)
    try:
        trials = [t for w in store.workloads() for t in store.trials(w.id)]
    finally:
        store.close()
    built: list[tuple[dict, str]] = []
    sizes: list[int] = []
    decisions: Counter[str] = Counter()
    for trial in trials:
        if trial.exe_hash is None:
            continue
        config = _flat(trial.config or {})
        if trial.status == "duplicate":
            same = [c for c, h in built if h == trial.exe_hash]
            if same:
                nearest = min(same, key=lambda c: sum(c.get(k) != config.get(k) for k in set(c) | set(config)))
                differ = [k for k in set(nearest) | set(config) if nearest.get(k) != config.get(k)]
                sizes.append(len(differ))
                decisions.update(differ)
        built.append((config, trial.exe_hash))
    return sizes, decisions


def workload_stats(folder: Path) -> dict:
    records = {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("*-seed*.json"))}
    duplicates: dict[str, list[int]] = {}
    distances: dict[str, dict] = {}
    for stem, record in records.items():
        strategy = record["strategy"]
        history = record["result"]["history"]
        duplicates.setdefault(strategy, []).append(sum(e["status"] == "duplicate" for e in history))
        sizes, decisions = duplicate_distances(folder / f"{stem}.db")
        entry = distances.setdefault(strategy, {"sizes": Counter(), "decisions": Counter()})
        entry["sizes"].update(sizes)
        entry["decisions"].update(decisions)
    agreement = None
    remeasured_path = folder / "remeasured.json"
    if remeasured_path.exists():
        speedups = json.loads(remeasured_path.read_text())["speedups"]
        ratios = []
        for record in records.values():
            row = speedups.get(config_key(record["result"]["best_config"]))
            if row and "speedup" in row and record["result"]["speedup"]:
                ratios.append(row["speedup"] / record["result"]["speedup"])
        if ratios:
            agreement = {"runs": len(ratios), "median": statistics.median(ratios), "min": min(ratios),
                         "max": max(ratios)}
    return {"workload": folder.name, "duplicates": duplicates,
            "duplicate_distance": {s: {"sizes": dict(sorted(e["sizes"].items())),
                                       "decisions": dict(e["decisions"].most_common(5))}
                                   for s, e in distances.items()},
            "remeasured_over_final": agreement}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    folders = sorted(f for f in args.dir.iterdir() if f.is_dir() and any(f.glob("*-seed*.json")))
    if not folders:
        raise SystemExit(f"{args.dir}: no run records; name an `xtat compare --db` folder")
    rows = [workload_stats(folder) for folder in folders]
    if args.json:
        print(json.dumps(rows))
        return
    for row in rows:
        print(row["workload"])
        for strategy, counts in row["duplicates"].items():
            far = row["duplicate_distance"][strategy]
            print(f"  {strategy:16} duplicates per seed {counts}  decisions away {far['sizes']}  "
                  f"most often differing {far['decisions']}")
        if row["remeasured_over_final"]:
            a = row["remeasured_over_final"]
            print(f"  re-measured / final speedup over {a['runs']} runs: median {a['median']:.2f} "
                  f"[{a['min']:.2f}, {a['max']:.2f}]")


if __name__ == "__main__":
    main()
