"""Build the decision prior xtat ships (src/xtat/search/wins.json): how often each kind of decision
won, counted per workload (`search.order`).

    .venv/bin/python benchmarks/build_prior.py [--report REPORT.md ...] [--store DB ...] \
        [--out src/xtat/search/wins.json]

Sources, added together:
- `--store`: xtat stores of campaigns (`xtat bench`, `xtat tune` runs): counted as a run counts its own
  store (`search.order.counted`), from their trials' paired speedups and their adopted results.
- `--report`: the markdown report of an `xtat bench` campaign (its "adopted speedup ... config"
  table): each workload's adopted config is a win of each decision kind in it. A report does not say
  what each search tried, so every kind that won anywhere in it counts as tried on every workload
  it tuned (a kind that won once in 40 workloads ranks as a 1-in-40 decision).

The shipped file was built from the 40-workload suite campaign whose report is docs/bench-report/
report.md (docs/search.md, "The decision prior"): rebuild it after a new campaign.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from xtat.search.order import SHIPPED, WinCounts, counted, kind
from xtat.store.sql import Store


def from_report(path: Path) -> WinCounts:
    text = path.read_text()
    tuned = re.search(r"(\d+) tuned", text)
    if tuned is None:
        raise SystemExit(f"{path}: no \"N tuned\" in its summary: not an xtat bench report")
    workloads = int(tuned.group(1))
    wins: dict[str, int] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[4].startswith("{"):
            continue
        config = json.loads(cells[4])
        for k in {kind(stage, id) for stage, values in config.items() for id in values}:
            wins[k] = wins.get(k, 0) + 1
    return WinCounts(wins, {}, workloads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", action="append", default=[], type=Path)
    parser.add_argument("--store", action="append", default=[])
    parser.add_argument("--out", type=Path, default=SHIPPED)
    options = parser.parse_args()
    if not options.report and not options.store:
        raise SystemExit("give at least one --report or --store")
    total = WinCounts()
    for report in options.report:
        total = total + from_report(report)
    stores = [Store.open(db) for db in options.store]
    total = total + counted(stores)
    options.out.write_text(json.dumps(total.to_json(), indent=1) + "\n")
    for k in sorted(total.wins, key=lambda k: -total.rate(k)):
        tried = total.tries.get(k, 0) + total.workloads
        print(f"{k:60s} won on {total.wins[k]:3d} of {tried:3d} workloads  rate {total.rate(k):.3f}")


if __name__ == "__main__":
    main()
