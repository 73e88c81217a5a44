"""How much a program has to give: every global compiler decision xtat offers, each on its own
against the default, then combinations of the best few; the best it found is the ceiling that
a tuning run is held to.

TARGET names the workload as for `xtat tune` (FILE.py:make, a suite name, ...). The decisions are
the global ones the tuner offers on this machine: each HLO pass of the passes stage that changes
this program switched off (`xla_disable_hlo_passes`), and each non-default value of each curated
codegen option (numerics-preserving ones only). Runtime decisions (process environment) and
per-op program rewrites are not probed: they cannot be given through `compiler_options`.

Each decision is measured in a fresh process of its own that builds two executables only, the
default and the decision, both with `jax.jit(fn, compiler_options=...)` as `xtat.jit` deploys:
`--rounds` interleaved rounds in a new random order each (`runner.timing.interleaved`), the
figure the median per-round ratio time(default) / time(decision) with its exact 95% interval
(`runner.timing.speedup_ci`). A decision whose outputs fail the tuner's own check against the
default's (`runner.verify`, its budget calibrated on one-ulp-perturbed inputs) is reported and
never part of the ceiling. Then the best `--top` decisions whose
interval lies above 1 (the best value of each option: two values of one option do not combine) are
measured together, in pairs and all at once. The fastest of some 30 noisy rows overstates itself
(the winner's curse), so the `--recheck` (3) fastest whose interval lies above 1 are measured
again, each in a fresh process; the ceiling is the best of those fresh figures whose interval lies
above 1; "1.000x" when none does.

    .venv/bin/python benchmarks/ceiling.py TARGET [--rounds 15] [--top 3] [--recheck 3] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def offered(target: str) -> dict[str, dict]:
    """The global decisions the tuner offers for this program: a name -> its compiler options."""
    import jax

    from xtat.stages.codegen.space import codegen_space
    from xtat.stages.passes import SAFE
    from xtat.targets import load_target

    workload = load_target(target)
    with tempfile.TemporaryDirectory() as dump:
        dumping = {"xla_dump_to": dump, "xla_dump_hlo_pass_re": ".*"}
        jax.jit(workload.fn, **workload.jit_options, compiler_options=dumping).lower(
            *workload.args, **(workload.kwargs or {})).compile()
        ran = {m.group(1) for path in Path(dump).glob("*.txt")
               for m in [re.search(r"\.after_(.+?)\.before_", path.name)] if m}
    decisions = {f"passes.{name}=off": {"xla_disable_hlo_passes": name} for name in sorted(ran & SAFE)}
    platform = jax.devices()[0].platform
    for decision in codegen_space(platform, allow_numerics_change=False).decisions:
        for value in decision.values:
            if value != decision.default:
                decisions[f"codegen.{decision.id}={value}"] = {decision.id: value}
    return decisions


def option_keys(name: str, decisions: dict[str, dict]) -> set[str]:
    """The compiler options a decision sets, each disabled pass its own."""
    return {f"{key}:{value}" if key == "xla_disable_hlo_passes" else key for key, value in decisions[name].items()}


def merged(options: list[dict]) -> dict:
    """One set of compiler options from several decisions (disabled passes joined)."""
    out: dict = {}
    for option in options:
        for key, value in option.items():
            if key == "xla_disable_hlo_passes" and key in out:
                value = ",".join(sorted({*out[key].split(","), *value.split(",")}))
            out[key] = value
    return out


def pair(target: str, options: dict, rounds: int, min_batch_s: float) -> dict:
    """The default and one set of options in this process: their speedup, and whether outputs agree."""
    import jax

    from xtat.runner.timing import interleaved, speedup_ci
    from xtat.targets import load_target

    workload = load_target(target)
    args, kwargs = workload.args, workload.kwargs or {}
    builds = {"default": jax.jit(workload.fn, **workload.jit_options),
              "decision": jax.jit(workload.fn, **workload.jit_options, compiler_options=options)}
    same = verified(builds["default"], builds["decision"], args, kwargs)
    times = interleaved({label: (lambda c=call: jax.block_until_ready(c(*args, **kwargs)))
                         for label, call in builds.items()}, rounds, min_sample_s=min_batch_s,
                        seed=int.from_bytes(os.urandom(4), "little"))
    ratio, low, high = speedup_ci(times["default"], times["decision"])
    return {"speedup": ratio, "low": low, "high": high, "same_outputs": same}


def verified(default, decision, args: tuple, kwargs: dict) -> bool:
    """Whether the decision's outputs pass the tuner's own check against the default's: the policy of
    `runner.verify` with the budget calibrated on one-ulp-perturbed inputs, as a worker calibrates it."""
    import jax
    import numpy as np

    from xtat.runner.verify import CALIBRATION_RUNS, Tolerance, calibrate, compare, perturbed

    leaves, tree = jax.tree.flatten((args, kwargs))

    def outputs(call, inputs: list) -> list:
        a, k = jax.tree.unflatten(tree, inputs)
        return [np.asarray(jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x)
                for x in jax.tree.leaves(jax.block_until_ready(call(*a, **k)))]  # typed keys compared as their data

    def moved(seed: int) -> list:
        return [perturbed([np.asarray(x)], seed)[0] if hasattr(x, "dtype") and jax.numpy.issubdtype(
            x.dtype, jax.numpy.floating) else x for x in leaves]

    reference = outputs(default, leaves)
    runs = [compare(outputs(default, moved(seed)), reference, Tolerance()) for seed in range(CALIBRATION_RUNS)]
    return compare(outputs(decision, leaves), reference, Tolerance(), calibrate(runs, len(reference))).ok


def measure_in_a_fresh_process(target: str, options: dict, rounds: int, min_batch_s: float) -> dict:
    done = subprocess.run([sys.executable, __file__, target, "--pair", json.dumps(options), "--rounds", str(rounds),
                           "--min-batch-s", str(min_batch_s)], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["exited with " + str(done.returncode)])[-1][:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def above_one(row: dict) -> bool:
    """A row that counts: measured, the same outputs as the default's, its interval above 1 (a median
    above 1 alone may be noise)."""
    return "error" not in row and row["same_outputs"] and row["low"] > 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--min-batch-s", type=float, default=0.05)
    parser.add_argument("--top", type=int, default=3, help="combine the best this many decisions")
    parser.add_argument("--recheck", type=int, default=3,
                        help="measure the best this many again, each in a fresh process: the ceiling is their best")
    parser.add_argument("--json", help="also write every row here")
    parser.add_argument("--pair", help=argparse.SUPPRESS)  # internal: one fresh process's measurement
    options = parser.parse_args()
    if options.pair is not None:
        print(json.dumps(pair(options.target, json.loads(options.pair), options.rounds, options.min_batch_s)))
        return

    decisions = offered(options.target)
    print(f"{options.target}: {len(decisions)} global decisions, each in a fresh process, "
          f"{options.rounds} interleaved rounds", flush=True)
    rows: dict[str, dict] = {}

    def run(name: str, compiler_options: dict, table: dict[str, dict] = rows, label: str = "") -> None:
        row = {"options": compiler_options, **measure_in_a_fresh_process(
            options.target, compiler_options, options.rounds, options.min_batch_s)}
        table[name] = row
        figure = row.get("error") or (f"{row['speedup']:.3f}x [{row['low']:.3f}, {row['high']:.3f}]"
                                      + ("" if row["same_outputs"] else "  outputs differ: not counted"))
        print(f"  {label}{name:{60 - len(label)}s} {figure}", flush=True)

    for name, compiler_options in decisions.items():
        run(name, compiler_options)
    # The best value of each option, best first: two values of one option cannot be combined.
    winners: list[str] = []
    for name in sorted((n for n, r in rows.items() if above_one(r)), key=lambda n: -rows[n]["speedup"]):
        if len(winners) < options.top and not any(option_keys(name, decisions) & option_keys(w, decisions)
                                                  for w in winners):
            winners.append(name)
    for size in range(2, len(winners) + 1):
        for combo in itertools.combinations(winners, size):
            run(" + ".join(combo), merged([decisions[n] for n in combo]))
    # The fastest of some 30 noisy rows is biased up (the winner's curse): the `--recheck` fastest whose
    # interval lies above 1 are measured again, each in a fresh process, and the ceiling is the best of
    # those fresh figures whose interval lies above 1 (a median above 1 alone may be noise).
    above = {n: r for n, r in rows.items() if above_one(r)}
    rechecked: dict[str, dict] = {}
    for name in sorted(above, key=lambda n: -above[n]["speedup"])[:options.recheck]:
        run(name, above[name]["options"], rechecked, "again: ")
    confirmed = {n: r for n, r in rechecked.items() if above_one(r)}
    best = max(confirmed, key=lambda n: confirmed[n]["speedup"], default=None)
    if best is None:
        print("ceiling: 1.000x (no decision's interval lies above 1 when measured again)" if above else
              "ceiling: 1.000x (no decision's interval lies above 1)")
    else:
        r = confirmed[best]
        print(f"ceiling: {r['speedup']:.3f}x [{r['low']:.3f}, {r['high']:.3f}] with {best} (measured again)")
    if options.json:
        Path(options.json).write_text(json.dumps({"target": options.target, "rounds": options.rounds,
                                                  "rows": rows, "rechecked": rechecked, "best": best},
                                                 indent=1) + "\n")


if __name__ == "__main__":
    main()
