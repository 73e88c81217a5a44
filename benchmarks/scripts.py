"""Whole scripts with no edit: each gallery script profiled, its hot programs tuned, then the
script timed plain and under `xtat run`, alternating, in fresh processes.

    .venv/bin/python benchmarks/scripts.py [--effort quick] [--rounds 6] [--only NAME,...] [--json OUT]

Per script (`examples/scripts/`): `xtat profile` (the programs found and their shares), `xtat tune
--profile` at `--effort` into a new store (its last step keeps the programs' configs only where the
whole script under `xtat run` is faster than plain beyond noise), then `xtat run --compare --rounds` (the end-to-end
speedup, the median of the rounds' ratios with its 95% interval, beside the speedup the shares
and the confirmed gains predict). Last: the geometric mean of the end-to-end speedups. Run it on
an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent / "examples" / "scripts"
ARGUMENTS = {  # a run of some seconds each: long enough that the steady state is most of it
    "train_flax_linen": ["--steps", "300"],
    "train_flax_nnx": ["--steps", "600"],
    "train_equinox": ["--steps", "600"],
    "train_haiku": ["--steps", "150"],
    "sample_numpyro": ["--samples", "2000"],
    "decode_kv_cache": ["--batches", "300"],
}
XTAT = [sys.executable, "-m", "xtat.cli.app"]


def one(name: str, folder: Path, effort: str, rounds: int) -> dict:
    from xtat.profile.figure import compare
    from xtat.profile.session import latest, profile

    db = folder / f"{name}.db"
    command = [sys.executable, str(SCRIPTS / f"{name}.py"), *ARGUMENTS[name]]
    found = profile(command, db, name)
    row: dict = {"script": name, "wall_s": found.wall_s, "complete": found.complete,
                 "programs": [{"name": p.name, "share": p.share, "kept": p.exported is not None,
                               "not_tunable": p.not_tunable} for p in found.programs if p.share >= 0.01]}
    if found.hot:
        tuned = subprocess.run([*XTAT, "tune", "--profile", name, "--db", str(db), "--effort", effort, "--json"],
                               capture_output=True, text=True)
        row["tuned"] = [json.loads(line) for line in tuned.stdout.splitlines() if line.startswith("{")]
        row["tune_error"] = tuned.stderr.strip()[-300:] if tuned.returncode else ""
    figure = compare(command, db, rounds, latest(db, name))
    row.update(speedup=list(figure.speedup), predicted=figure.predicted,
               adopted=[{"name": g.name, "share": g.share, "speedup": g.speedup} for g in figure.programs
                        if g.speedup != 1.0])
    return row


def _whole_script(row: dict) -> str:
    """What `tune --profile`'s whole-script timing decided (`profile.whole_script`)."""
    decided = [line for line in row.get("tuned", []) if "script" in line]
    if not decided or not decided[-1]["ways"]:
        return "whole script not timed at tune"
    ways = ", ".join(f"{w['label']} {w['speedup'][0]:.3f}x [{w['speedup'][1]:.3f}, {w['speedup'][2]:.3f}]"
                     for w in decided[-1]["ways"])
    kept, withdrawn = decided[-1]["kept"], decided[-1]["withdrawn"]
    return f"at tune {ways}: " + (f"kept {kept}" if kept else f"withdrawn {', '.join(withdrawn)}" if withdrawn
                                  else "none kept")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--effort", default="quick")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--only", help="comma-separated script names (default: all)")
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    names = options.only.split(",") if options.only else list(ARGUMENTS)
    rows = []
    with tempfile.TemporaryDirectory(prefix="xtat-scripts-") as folder:
        for name in names:
            row = one(name, Path(folder), options.effort, options.rounds)
            rows.append(row)
            programs = ", ".join(f"{p['name']} {p['share']:.0%}" for p in row["programs"]) or "none over 1%"
            adopted = ", ".join(f"{a['name']} {a['speedup']:.3f}x" for a in row["adopted"]) or "nothing adopted"
            s = row["speedup"]
            predicted = "-" if row["predicted"] is None else f"{row['predicted']:.3f}x"
            print(f"{name}: programs {programs}; {adopted}; {_whole_script(row)}; end to end {s[0]:.3f}x "
                  f"[{s[1]:.3f}, {s[2]:.3f}], predicted {predicted}", flush=True)
            if options.json:
                options.json.write_text(json.dumps(rows, indent=1) + "\n")
    geomean = math.exp(sum(math.log(r["speedup"][0]) for r in rows) / len(rows))
    print(f"geometric mean of the end-to-end speedups over {len(rows)} scripts: {geomean:.3f}x")


if __name__ == "__main__":
    main()
