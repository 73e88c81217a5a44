"""Every valid layout of a suite workload's declared dimensions, tuned and verified on forced host devices.

    .venv/bin/python benchmarks/sharding_layouts.py [--targets suite:mesh-transformer/train,suite:moe-glam/train]
        [--devices 2,4] [--out DIR]

For each target and device count, a fresh process started with
`XLA_FLAGS=--xla_force_host_platform_device_count=N` (workers inherit it) tunes the sharding stage
alone with the grid strategy and a budget of every layout plus the default, so every valid layout
(`stages.sharding.layouts.enumerate_layouts`) is compiled for its mesh, verified against the
single-device reference and timed; the best is adopted only when confirmed through the deploy path
(`jax.jit(..., in_shardings=...)` in fresh processes, interleaved with the default placement), and
`xtat explain` measures the sharding stage's share. When the search's finalists were all slower than
the default (nothing adopted), the fastest is confirmed through the deploy path all the same, so the
row's figure is a deploy-path one whatever its sign. Prints a Markdown table; `--out DIR` keeps the
stores and a JSON of the rows.

    .venv/bin/python benchmarks/sharding_layouts.py --confirm-best TARGET DB --devices N

confirms the fastest finalist of an existing store (a run made before this step existed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_one(target: str, db: str) -> dict:
    """In a process that already sees its devices: tune every layout, then explain the adopted one."""
    import jax

    import xtat
    from xtat.capture.targets import load_target
    from xtat.capture.workload import capture
    from xtat.stages.sharding.layouts import enumerate_layouts
    from xtat.tuning.ablation import explain

    workload = load_target(target)
    captured = capture(workload)
    layouts = enumerate_layouts(list(zip(captured.dims, (x.shape for x in captured.inputs), strict=True)),
                                jax.device_count())[1:]
    started = time.perf_counter()
    result = xtat.tune(workload, db=db, stages=("sharding",), strategy="grid", budget=len(layouts) + 1)
    row = {"target": target, "devices": jax.device_count(), "layouts": len(layouts), "trials": result.trials,
           "adopted": result.adopted, "layout": result.best_config.get("sharding", {}).get("layout"),
           "speedup": result.speedup, "speedup_ci": list(result.speedup_ci), "default_ms": result.default_ms,
           "best_ms": result.best_ms, "message": result.message, "tune_s": time.perf_counter() - started}
    if result.adopted:
        ablation = explain(workload, db=db)
        row["sharding_share"] = ablation.stage_shares.get("sharding")
    else:
        row.update(confirm_best(target, db))
    return row


def confirm_best(target: str, db: str) -> dict:
    """The store's fastest finalist, deployed as production deploys it in fresh processes and timed
    interleaved with the default (`tuning.confirmation`): the figure for a layout nothing adopted."""
    from xtat.capture.targets import load_target
    from xtat.capture.workload import capture
    from xtat.core.space import config_id
    from xtat.stages.base import concretize
    from xtat.stages.registry import make_stages
    from xtat.store.sql import Store
    from xtat.tuning.confirmation import confirm
    from xtat.tuning.result import recorded_decision
    from xtat.tuning.session import open_runner
    from xtat.tuning.settings import TuneSettings

    captured = capture(load_target(target))
    with Store.open(db) as store:
        result = store.latest_result(store.find_workload(captured.fingerprint).id)
    finalists = recorded_decision(result.detail.summary).finalists if result and result.detail.summary else ()
    if not finalists:
        return {"deploy": None}
    best = finalists[0].config
    settings = TuneSettings()
    with open_runner(captured, settings) as runner:
        confirmed = confirm(runner, concretize(make_stages(), best), config_id(best), settings)
    return {"deploy": {"layout": best.get("sharding", {}).get("layout"), "verdict": confirmed.verdict.value,
                       "speedup": confirmed.speedup, "speedup_ci": list(confirmed.speedup_ci),
                       "default_ms": confirmed.default_s * 1e3, "layout_ms": confirmed.candidate_s * 1e3,
                       "rounds": confirmed.rounds, "error": confirmed.error}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="suite:mesh-transformer/train,suite:moe-glam/train")
    parser.add_argument("--devices", default="2,4")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--confirm-best", nargs=2, metavar=("TARGET", "DB"))
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # TARGET DB, in a process with its devices
    parser.add_argument("--best", nargs=2, help=argparse.SUPPRESS)  # TARGET DB, in a process with its devices
    options = parser.parse_args()
    if options.one or options.best:
        print(json.dumps(run_one(*options.one) if options.one else confirm_best(*options.best)))
        return
    if options.confirm_best:
        env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={int(options.devices)}"}
        run = subprocess.run([sys.executable, __file__, "--best", *options.confirm_best], env=env,
                             capture_output=True, text=True)
        if run.returncode != 0:
            raise SystemExit(f"confirming failed:\n{run.stderr[-3000:]}")
        print(run.stdout.strip().splitlines()[-1])
        return
    out = options.out or Path(tempfile.mkdtemp(prefix="xtat-sharding-"))
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for target in options.targets.split(","):
        for devices in (int(d) for d in options.devices.split(",")):
            db = out / f"{target.removeprefix('suite:').replace('/', '-')}-{devices}.db"
            env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
            run = subprocess.run([sys.executable, __file__, "--one", target, str(db)], env=env,
                                 capture_output=True, text=True)
            if run.returncode != 0:
                raise SystemExit(f"{target} on {devices} devices failed:\n{run.stderr[-3000:]}")
            rows.append(json.loads(run.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
    (out / "sharding-layouts.json").write_text(json.dumps(rows, indent=1))
    print("| workload | devices | valid layouts | trials | adopted layout | speedup [95% CI] | sharding share |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        trials = ", ".join(f"{k} {v}" for k, v in sorted(r["trials"].items()))
        share = f"{r['sharding_share']:.0%}" if r.get("sharding_share") is not None else "-"
        deploy = r.get("deploy")
        layout, speedup, ci = ((deploy["layout"] + " (not adopted)", deploy["speedup"], deploy["speedup_ci"])
                               if deploy else (r["layout"] or "none", r["speedup"], r["speedup_ci"]))
        print(f"| {r['target']} | {r['devices']} | {r['layouts']} | {trials} | {layout} | "
              f"{speedup:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] | {share} |")


if __name__ == "__main__":
    main()
