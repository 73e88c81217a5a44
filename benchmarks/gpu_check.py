"""The GPU check: XLA:GPU's codegen options and per-fusion tiles tuned on two suite workloads, on one GPU,
and each winner measured again through `xtat.jit` in fresh processes against plain `jax.jit`.

    scripts/gpu-check                                   # on the GPU machine; see that script
    .venv/bin/python benchmarks/gpu_check.py --out DIR [--budget 12] [--time 90] [--stages codegen,tiles]
        [--pairs 6] [--allow-cpu]

Per workload (one matmul-heavy, one mixture of experts): `xtat.tune` over the codegen and tiles
stages with a small budget (the default strategy, pinned autotuning), then `real_code.delivered`:
xtat.jit against jax.jit, interleaved, in `--pairs` pairs of fresh processes. It writes
`gpu-check.json` and `gpu-check.md` to DIR, and each run's pinned autotune results (XLA's own
choices) as `<workload>.autotune.textproto`, fixtures for the CPU tests. `--allow-cpu` runs the
same on CPU (no tiles: XLA:CPU has no autotuner) to check the script itself.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

WORKLOADS = ("suite:bert/train", "suite:moe-glam/train")  # matmul-heavy; mixture of experts


def _device() -> dict:
    import jax

    from xtat.capture.workload import environment_identity

    return {"devices": [str(d) for d in jax.devices()], **environment_identity()}


def check(target: str, out: Path, db: Path, budget: int, time_s: float, stages: tuple[str, ...], rounds: int,
          pairs: int) -> dict:
    from real_code import delivered

    import xtat
    from xtat.capture.targets import load_target
    from xtat.stages.tiles import results
    from xtat.store.sql import Store

    started = time.perf_counter()
    result = xtat.tune(load_target(target), db=db, budget=budget, time_s=time_s, stages=stages)
    with Store.open(db) as store:
        record = store.workload(result.fingerprint)
        latest = store.latest_result(record.id) if record else None
    pinned = latest.detail.pinned_autotune_results if latest else ""
    stem = target.removeprefix("suite:").replace("/", "-")
    tiles = results.contents(pinned) if pinned else results.Contents((), {})
    if pinned:
        (out / f"{stem}.autotune.textproto").write_text(pinned)
    tile_decisions = sum(len(p.values(name)) > 1 for p in tiles.tiles for name in p.chosen)
    changed = sorted(result.best_config.get("tiles", {})) if result.adopted else []
    row = {
        "workload": target, "message": result.message, "trials": result.trials, "adopted": result.adopted,
        "config": result.best_config if result.adopted else None,
        "default_ms": result.default_ms, "default_ci_ms": list(result.default_ci_ms),
        "tuned_ms": result.best_ms, "tuned_ci_ms": list(result.best_ci_ms),
        "search_speedup": result.speedup, "search_speedup_ci": list(result.speedup_ci),
        "fusions_by_kind": tiles.kinds, "tile_fusions": len(tiles.tiles), "tile_decisions": tile_decisions,
        "tile_decisions_changed": len(changed), "notes": result.notes, "tune_s": time.perf_counter() - started,
    }
    if result.adopted:
        row.update(delivered(target, db, False, rounds, pairs))
    return row


def markdown(device: dict, rows: list[dict]) -> str:
    lines = [f"GPU check on {device.get('device_kind')} (jax {device.get('jax')}, CUDA runtime "
             f"{device.get('cuda_runtime', '?')}, driver {device.get('cuda_driver', '?')})", "",
             "| workload | trials | default ms | tuned ms | search speedup [95% CI] | xtat.jit vs jax.jit [95% CI] "
             "| Triton fusions | tile decisions (changed) | other fusions |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        trials = ", ".join(f"{k} {v}" for k, v in sorted(r["trials"].items()))
        jit = (f"{r['delivered']:.3f} [{r['delivered_ci'][0]:.3f}, {r['delivered_ci'][1]:.3f}]"
               if "delivered" in r else "not adopted")
        others = ", ".join(f"{n} {k}" for k, n in sorted(r["fusions_by_kind"].items()) if k != "triton") or "none"
        lines.append(f"| {r['workload']} | {trials} | {r['default_ms']:.3f} | {r['tuned_ms']:.3f} | "
                     f"{r['search_speedup']:.3f} [{r['search_speedup_ci'][0]:.3f}, {r['search_speedup_ci'][1]:.3f}] | "
                     f"{jit} | {r['tile_fusions']} | {r['tile_decisions']} ({r['tile_decisions_changed']}) | "
                     f"{others} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget", type=int, default=12, help="configs per workload, the default included")
    parser.add_argument("--time", type=float, default=90.0, help="search seconds per workload")
    parser.add_argument("--stages", default="codegen,tiles", help="stages searched")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--pairs", type=int, default=6)  # 2 gave an interval of [0.36, 3.65] on the H200
    parser.add_argument("--only", help="comma-separated targets (default: the two of WORKLOADS)")
    parser.add_argument("--allow-cpu", action="store_true", help="run on CPU too (checks the script, not a GPU)")
    options = parser.parse_args()
    options.out.mkdir(parents=True, exist_ok=True)
    device = _device()
    if device["platform"] not in ("gpu", "cuda", "rocm") and not options.allow_cpu:
        raise SystemExit(f"no GPU: jax sees {device['devices']}; this check is for a GPU machine (--allow-cpu "
                         "runs it anyway)")
    rows = []
    # The study's database stays out of --out: the device tool brings back few files, and it is a scratch.
    with tempfile.TemporaryDirectory(prefix="xtat-gpu-check-") as scratch:
        for target in options.only.split(",") if options.only else WORKLOADS:
            rows.append(check(target, options.out, Path(scratch) / "gpu-check.db", options.budget, options.time,
                              tuple(options.stages.split(",")), options.rounds, options.pairs))
            print(f"{target}: {rows[-1]['message']}", flush=True)
            # Written after each workload, so a run stopped at its time limit still leaves what it measured.
            (options.out / "gpu-check.json").write_text(json.dumps({"device": device, "rows": rows}, indent=1,
                                                                   default=str))
            (options.out / "gpu-check.md").write_text(markdown(device, rows))
    print(markdown(device, rows))


if __name__ == "__main__":
    main()
