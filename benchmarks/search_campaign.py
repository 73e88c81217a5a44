"""What the search finds of what a program has: per program, the ceiling, then a quick and a standard
tuning run, each with its adopted config, search, side-by-side, confirmed and delivered speedups.

    .venv/bin/python benchmarks/search_campaign.py TARGET... [--efforts quick,standard] [--no-ceiling] \
        [--ceiling-from CEILING.json] [--pairs 4] [--rounds 11] [--json OUT.json] [--keep FOLDER]
    .venv/bin/python benchmarks/search_campaign.py --summarise OUT.json... (the lines of several runs together)
    .venv/bin/python benchmarks/search_campaign.py --again OUT.json --keep FOLDER --pairs 12 --json AGAIN.json
        (each adopted run's delivered figure measured again from the stores the campaign kept)

TARGET names a workload as `xtat tune` does (examples/NAME.py:make, suite:gpt/inference, ...). Per target:

1. the ceiling (`benchmarks/ceiling.py`, in a process of its own): every offered global decision on
   its own against the default, each in a fresh process, and combinations of the best few;
2. per effort: `xtat tune --effort E` into a new store, in a process of its own (nothing tuned
   before is in it), reporting the adopted config, each finalist's search figure (its trial's paired
   speedup) beside its side-by-side figure, the confirmation's verdict, rounds and load, and the
   run's wall time;
3. where a config was adopted, the delivered speedup through its deploy path in fresh processes
   (`benchmarks/real_code.py: delivered`: xtat.jit, under `xtat run` where it holds a runtime
   decision, against plain jax.jit, in `--pairs` sets of processes); 1.0 where none was. Where the
   ceiling found a config, a third process of each set runs it (jax.jit with its options, its
   runtime setup entered), interleaved with the two: the ceiling's config and the tuner's measured
   in the same rounds, so the share is not a comparison of two days' figures.

Then the campaign's lines: per program, the share of the ceiling's gain each effort delivered;
finalists whose search figure lies within 10% of their side-by-side one; finalists rejected by
confirmation; confirmations marked load-dependent. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # sibling benchmarks (real_code, ceiling), imported where used: they load jax


def ceiling(target: str, folder: Path, measured: Path | None = None) -> dict:
    """The ceiling's row: measured now, or read from `measured` (a `ceiling.py --json` file of this
    target: the ceiling does not depend on the search's code, and takes 5-15 minutes a program)."""
    out = folder / "ceiling.json"
    if measured is not None:
        out.write_text(measured.read_text())
    else:
        done = subprocess.run([sys.executable, str(HERE / "ceiling.py"), target, "--json", str(out)], text=True,
                              capture_output=True)
        print(done.stdout, end="", flush=True)
        if done.returncode != 0:
            return {"error": done.stderr.strip()[-300:]}
    from ceiling import chosen  # benchmarks/ceiling.py

    data = json.loads(out.read_text())
    best = chosen(data["rows"], data["rechecked"])  # by today's rule, for a file an older ceiling.py wrote too
    row = data["rechecked"][best] if best else None  # the ceiling's figure: measured again (ceiling.py)
    value = row["speedup"] if row and row["low"] > 1.0 else 1.0
    probe = {"options": row["options"], "setup": row["setup"]} if row and value > 1.0 else None
    return {"ceiling": value, "ceiling_ci": [row["low"], row["high"]] if row else [1.0, 1.0], "ceiling_with": best,
            "ceiling_probe": probe}


def tune(target: str, effort: str, db: Path) -> dict:
    """`xtat tune --effort` in a process of its own; the run's JSON."""
    done = subprocess.run([sys.executable, "-c", "from xtat.cli.app import main; main()", "tune", target,
                           "--effort", effort, "--db", str(db), "--json"], text=True, capture_output=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr.strip() or done.stdout.strip())[-300:]}
    return json.loads(lines[-1])  # the CLI's --json object is its last line


def search_figures(db: Path, finalists: list[dict]) -> list[dict]:
    """Each finalist's search figure (its trial's paired speedup) beside its side-by-side one."""
    from xtat.store.sql import Store

    store = Store.open(db)
    try:
        trials = {t.id: t for w in store.workloads() for t in store.trials(w.id)}
    finally:
        store.close()
    rows = []
    for f in finalists:
        trial = trials.get(f["trial"])
        side = f.get("search_speedup") or f["speedup"]  # a confirmed finalist keeps its side-by-side as search_*
        rows.append({"config": f["config"], "search": trial.speedup if trial else None, "side_by_side": side,
                     "confirmed": (f.get("confirmation") or {}).get("verdict"),
                     "gave_way": f.get("gave_way_to") is not None})
    return rows


def delivered_figures(target: str, db: Path, config: dict, rounds: int, pairs: int, probe: dict | None) -> dict:
    """An adopted config's delivered speedup through its deploy path (`real_code.delivered`), and where
    the ceiling found a config (`probe`), that config's in the same rounds."""
    from real_code import delivered  # benchmarks/real_code.py

    source = target.removesuffix(":make") if target.endswith(".py:make") else target
    measured = delivered(source, db, bool(config.get("runtime")), rounds, pairs, beside=probe)
    figures = {"delivered": [measured["delivered"], *measured["delivered_ci"]]}
    if "beside" in measured:  # the ceiling's config in the same rounds: its figure that day
        figures["ceiling_beside"] = measured["beside"]
        figures["delivered_over_ceiling_config"] = measured["delivered_over_beside"]
    return figures


def kept_folder(keep: Path, target: str) -> Path:
    """Where `--keep` holds one target's stores and ceiling rows."""
    return keep / re.sub(r"[^A-Za-z0-9_.-]+", "_", target)


def again(rows: list[dict], efforts: list[str], keep: Path, rounds: int, pairs: int) -> list[dict]:
    """The rows with each adopted run's delivered figures measured again from the store the campaign
    kept (`--keep`), the first figures kept beside them under "first": a delivered figure over four
    pairs of processes moves by several percent from one measurement to the next."""
    for row in rows:
        folder = kept_folder(keep, row["target"])
        for effort in efforts:
            entry = row.get(effort) or {}
            if not entry.get("config"):
                continue
            db = folder / f"{effort}.db"
            if not db.is_file():
                raise SystemExit(f"--again: no store {db}: give --keep the folder the campaign kept its stores in")
            fresh = delivered_figures(row["target"], db, entry["config"], rounds, pairs, row.get("ceiling_probe"))
            entry["first"] = {key: entry[key] for key in fresh if key in entry}
            entry.update(fresh, delivered_pairs=pairs)
            entry.pop("delivered_error", None)
            print(f"{row['target']} {effort}: delivered again {fresh['delivered'][0]:.3f}x "
                  f"[{fresh['delivered'][1]:.3f}, {fresh['delivered'][2]:.3f}]", flush=True)
    return rows


def one(target: str, efforts: list[str], with_ceiling: bool, pairs: int, rounds: int, keep: Path | None,
        ceiling_from: Path | None = None) -> dict:
    row: dict = {"target": target}
    with tempfile.TemporaryDirectory(prefix="xtat-campaign-") as scratch:
        # --keep: each run's store and the ceiling's rows stay, to read why a run chose what it did.
        folder = Path(scratch) if keep is None else kept_folder(keep, target)
        folder.mkdir(parents=True, exist_ok=True)
        if with_ceiling:
            row.update(ceiling(target, folder, ceiling_from))
        for effort in efforts:
            db = folder / f"{effort}.db"
            result = tune(target, effort, db)
            if "error" in result:
                row[effort] = result
                print(f"{target} {effort}: failed: {result['error']}", flush=True)
                continue
            confirmation = result.get("confirmation") or {}
            entry = {"adopted": result["adopted"], "config": result["best_config"] if result["adopted"] else None,
                     "message": result["message"], "wall_s": result["wall_s"], "trials": result["trials"],
                     "time_split": result.get("time_split"),
                     "finalists": search_figures(db, result["finalists"]),
                     "confirmed": [result["speedup"], *result["speedup_ci"]] if confirmation else None,
                     "load_dependent": confirmation.get("load_dependent"),
                     "other_cores": (confirmation.get("load") or {}).get("other_cores")}
            entry["delivered"] = [1.0, 1.0, 1.0]
            if result["adopted"]:
                try:
                    entry.update(delivered_figures(target, db, entry["config"], rounds, pairs,
                                                   row.get("ceiling_probe")))
                except RuntimeError as error:  # a process that did not start: recorded; `--again` measures it
                    entry.update(delivered=None, delivered_error=str(error))
            row[effort] = entry
            d = entry["delivered"]
            print(f"{target} {effort}: {result['message']} ({result['wall_s']:.0f} s); delivered "
                  + (f"{d[0]:.3f}x [{d[1]:.3f}, {d[2]:.3f}]" if d else f"failed: {entry['delivered_error']}"),
                  flush=True)
    return row


def summary(rows: list[dict], efforts: list[str]) -> str:
    lines = ["| program | ceiling [95% CI] | " + " | ".join(
        f"{e}: adopted config, confirmed, delivered [95% CI], wall s" for e in efforts) + " |",
        "|---|---|" + "---|" * len(efforts)]
    finalists = close = rejected = confirmations = load_dependent = 0
    for r in rows:
        cells = [r["target"], f"{r['ceiling']:.3f} [{r['ceiling_ci'][0]:.3f}, {r['ceiling_ci'][1]:.3f}] "
                 f"({r['ceiling_with']})" if "ceiling" in r else "-"]
        for e in efforts:
            x = r.get(e) or {}
            if "error" in x or not x:
                cells.append(f"failed: {x.get('error', '')[:80]}")
                continue
            for f in x["finalists"]:
                finalists += 1
                close += f["search"] is not None and abs(f["search"] / f["side_by_side"] - 1) <= 0.10
                confirmations += f["confirmed"] is not None
                rejected += f["confirmed"] not in (None, "faster")
            load_dependent += bool(x["load_dependent"])
            confirmed = "-" if not x["confirmed"] else f"{x['confirmed'][0]:.3f}x"
            d = x["delivered"]
            if d is None:
                cells.append(f"{json.dumps(x['config'])}, {confirmed}, delivered: failed "
                             f"({x['delivered_error'][:200]}), {x['wall_s']:.0f}")
                continue
            share = ""
            if "ceiling" in r and r["ceiling"] > 1.0:
                share = f", {100 * math.log(d[0]) / math.log(r['ceiling']):.0f}% of the ceiling's gain"
            beside = x.get("ceiling_beside")
            if beside and beside[0] > 1.0:
                over = x["delivered_over_ceiling_config"]
                share += (f" ({100 * math.log(d[0]) / math.log(beside[0]):.0f}% of its config's "
                          f"{beside[0]:.3f}x in the same rounds; over it {over[0]:.3f}x "
                          f"[{over[1]:.3f}, {over[2]:.3f}])")
            cells.append(f"{json.dumps(x['config']) if x['config'] else 'none'}, {confirmed}, {d[0]:.3f}x "
                         f"[{d[1]:.3f}, {d[2]:.3f}]{share}, {x['wall_s']:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append(f"\nFinalists: {finalists}; search figure within 10% of side by side: {close}; "
                 f"sent to confirmation: {confirmations}, rejected there: {rejected}; "
                 f"confirmations marked load-dependent: {load_dependent}.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("targets", nargs="*")
    parser.add_argument("--summarise", type=Path, nargs="+", metavar="JSON",
                        help="measure nothing: print the summary of the rows these --json files hold, together")
    parser.add_argument("--again", type=Path, metavar="JSON",
                        help="run nothing new: measure each adopted run's delivered figure in this --json file "
                        "again (--pairs, --rounds) from the stores in --keep FOLDER; writes --json")
    parser.add_argument("--efforts", default="quick,standard")
    parser.add_argument("--no-ceiling", action="store_true")
    parser.add_argument("--ceiling-from", type=Path, metavar="JSON",
                        help="one TARGET: its ceiling as an earlier `ceiling.py --json` measured it, not again")
    parser.add_argument("--pairs", type=int, default=4, help="pairs of fresh processes for the delivered figure")
    parser.add_argument("--rounds", type=int, default=11, help="interleaved rounds per pair")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", type=Path, help="keep each program's stores and ceiling rows in FOLDER/PROGRAM/ "
                        "(a new or empty FOLDER: a non-empty one is refused, its stores would be resumed)")
    options = parser.parse_args()
    efforts = options.efforts.split(",")
    if options.summarise:
        print(summary([row for path in options.summarise for row in json.loads(path.read_text())], efforts))
        return
    if options.again:
        if options.keep is None or options.json is None:
            parser.error("--again needs --keep (the folder holding the campaign's stores) and --json (where to write)")
        rows = again(json.loads(options.again.read_text()), efforts, options.keep, options.rounds, options.pairs)
        options.json.write_text(json.dumps(rows, indent=1) + "\n")
        print(summary(rows, efforts))
        return
    if not options.targets:
        parser.error("name at least one TARGET (or --summarise JSON files)")
    if options.ceiling_from is not None and len(options.targets) != 1:
        parser.error("--ceiling-from holds one target's ceiling: name exactly one TARGET")
    if options.keep is not None and options.keep.exists() and any(options.keep.iterdir()):
        # A store left there would be resumed: its run would report an earlier decision as new.
        parser.error(f"--keep {options.keep}: the folder is not empty; give a new one")
    rows = []
    for target in options.targets:
        rows.append(one(target, efforts, not options.no_ceiling, options.pairs, options.rounds,
                        options.keep, options.ceiling_from))
        if options.json:
            options.json.write_text(json.dumps(rows, indent=1) + "\n")
    print(summary(rows, efforts))


if __name__ == "__main__":
    main()
