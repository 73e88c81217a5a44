"""How well the cost model transfers to a workload it has never seen.

    .venv/bin/python benchmarks/transfer.py DIR [--json]

DIR is an `xtat compare --db DIR` folder (one folder of run stores per
workload). For each workload, the cost model (decision and workload features,
as `model` uses with a prior) is trained on every timed trial of the *other*
workloads' runs and ranks this workload's timed trials: Kendall's tau between
predicted and measured log(time / default), and the measured speedup of the 20
trials it ranks fastest against the best and the share of trials faster than
the default. Nothing is measured: it reads the stores.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from xtat.model.cost_model import Example, examples, held_out_ranking
from xtat.store.sql import Store

TOP = 20


def workload_examples(folder: Path) -> list[Example]:
    out: list[Example] = []
    for path in sorted(folder.glob("*.db")):
        store = Store.open(path, read_only=True)
        try:
            out += examples(store, ("decisions", "workload"))
        finally:
            store.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    by_workload = {folder.name: workload_examples(folder) for folder in sorted(args.dir.iterdir()) if folder.is_dir()}
    by_workload = {name: data for name, data in by_workload.items() if data}
    if len(by_workload) < 2:
        raise SystemExit(f"{args.dir}: needs the runs of at least two workloads (an `xtat compare --db` folder)")
    rows = []
    for name, test in by_workload.items():
        train = [e for other, data in by_workload.items() if other != name for e in data]
        predicted, measured, tau, p_value = held_out_ranking(train, test)
        top = np.argsort(predicted, kind="stable")[:TOP]
        rows.append({"workload": name, "train": len(train), "test": len(test), "kendall_tau": tau,
                     "p_value": p_value, "top_median_speedup": float(np.exp(-np.median(measured[top]))),
                     "top_best_speedup": float(np.exp(-measured[top].min())),
                     "best_speedup": float(np.exp(-measured.min())), "share_faster": float((measured < 0).mean())})
    if args.json:
        print(json.dumps(rows))
        return
    print(f"{'workload':32} {'train':>6} {'test':>5} {'tau':>6}  top-{TOP} median/best speedup  best  faster")
    for r in rows:
        print(f"{r['workload']:32} {r['train']:6d} {r['test']:5d} {r['kendall_tau']:6.2f}  "
              f"{r['top_median_speedup']:10.2f}x {r['top_best_speedup']:6.2f}x  {r['best_speedup']:6.2f}x "
              f"{r['share_faster']:5.0%}")


if __name__ == "__main__":
    main()
