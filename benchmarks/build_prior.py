"""Build the decision prior xtat ships (src/xtat/search/wins.json): per workload, which kinds of
decision won on it and which its searches tried (`search.order`).

    .venv/bin/python benchmarks/build_prior.py [--report REPORT.md ...] [--store DB ...] \
        [--out src/xtat/search/wins.json]

Sources, one record per workload each:
- `--store`: xtat stores of campaigns (`xtat bench`, `xtat tune` runs, `search_campaign.py --keep`):
  read as a run reads its own store (`search.order.recorded`), from their trials' paired speedups and
  their adopted results, keyed by the program's fingerprint (a program in several stores is one).
- `--report`: the markdown report of an `xtat bench` campaign: each tuned workload of its "Speedups"
  table, by name, with the decision kinds of its adopted config (its "config" table) as wins. A report
  does not say what each search tried, so such a workload counts as having tried every kind (a kind
  that won once in 40 workloads ranks as a 1-in-40 decision).

A run leaves its own program's record out (by fingerprint; a report's row by name), so a campaign
over these programs measures each with what the others taught.

The shipped file was built from the 40-workload suite campaign of docs/bench-report/report.md and
the stores of the gallery campaign (docs/search.md, "The order of decisions"): rebuild it after a
new campaign.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from xtat.search.order import SHIPPED, WorkloadWins, kind, recorded, tally, write_prior
from xtat.store.sql import Store

_ROW = re.compile(r"^\|(.+)\|\s*$")


def from_report(path: Path) -> list[WorkloadWins]:
    """One record per tuned workload of an `xtat bench` report: its name, its adopted config's kinds."""
    text = path.read_text()
    tuned = re.search(r"(\d+) tuned", text)
    if tuned is None:
        raise SystemExit(f"{path}: no \"N tuned\" in its summary: not an xtat bench report")
    names: list[str] = []
    won: dict[str, set[str]] = {}
    section = ""
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        row = _ROW.match(line.strip())
        if row is None:
            continue
        cells = [c.strip() for c in row.group(1).split("|")]
        if section == "Speedups" and cells[0] not in ("workload", "") and not cells[0].startswith("-"):
            names.append(cells[0])
        elif len(cells) == 5 and cells[4].startswith("{"):
            config = json.loads(cells[4])
            won[cells[0]] = {kind(stage, id) for stage, values in config.items() for id in values}
    if len(names) != int(tuned.group(1)) or not set(won) <= set(names):
        raise SystemExit(f"{path}: its Speedups table names {len(names)} workloads, its summary "
                         f"{tuned.group(1)} tuned, or a config row names a workload that table lacks")
    return [WorkloadWins(name, "", frozenset(won.get(name, ())), None) for name in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", action="append", default=[], type=Path)
    parser.add_argument("--store", action="append", default=[])
    parser.add_argument("--out", type=Path, default=SHIPPED)
    options = parser.parse_args()
    if not options.report and not options.store:
        raise SystemExit("give at least one --report or --store")
    records = [record for report in options.report for record in from_report(report)]
    records += sorted(recorded([Store.open(db) for db in options.store]), key=lambda r: r.name)
    options.out.write_text(write_prior(records))
    total = tally(records)
    for k in sorted(total.wins, key=lambda k: -total.rate(k)):
        tried = total.tries.get(k, 0) + total.workloads
        print(f"{k:60s} won on {total.wins[k]:3d} of {tried:3d} workloads  rate {total.rate(k):.3f}")


if __name__ == "__main__":
    main()
