"""How much a program has to give: every global compiler decision xtat offers, each on its own
against the default, then combinations of the best few; the best it found is the ceiling that
a tuning run is held to.

TARGET names the workload as for `xtat tune` (FILE.py:make, a suite name, ...). The decisions are
the global ones the tuner offers on this machine: each HLO pass of the passes stage that changes
this program switched off (`xla_disable_hlo_passes`), and each non-default value of each curated
codegen option (numerics-preserving ones only), and each non-default runtime decision (the
process's CPU count, its host device count). Per-op program rewrites are not probed.

Each decision is measured in a fresh process of its own that builds two executables only, the
default and the decision, both with `jax.jit(fn, compiler_options=...)` as `xtat.jit` deploys:
`--rounds` interleaved rounds in a new random order each (`runner.timing.interleaved`), the
figure the median per-round ratio time(default) / time(decision) with its exact 95% interval
(`runner.timing.speedup_ci`). A runtime decision holds for a whole process, so its row (and any
combination with it) is measured as `xtat run` deploys it: a process entering it (`ProcessSetup`)
against a default process, interleaved round by round, in `--pairs` pairs of fresh processes one
after another (`benchmarks/real_code.process_pairs`: the geometric mean of the pairs' median ratios,
a t interval across pairs). A decision whose outputs fail the tuner's own check against the
default's (`runner.verify`, its budget calibrated on one-ulp-perturbed inputs) is reported and
never part of the ceiling. Then the best `--top` decisions whose
interval lies above 1 (the best value of each option: two values of one option do not combine) are
measured together, in pairs and all at once. The fastest of some 30 noisy rows overstates itself
(the winner's curse), so the `--recheck` (3) fastest whose interval lies above 1 are measured
again, each in a fresh process. The ceiling's decision is chosen on the first figures: the fastest
row whose fresh figure's interval also lies above 1; the ceiling is that fresh figure alone
(`chosen`). Taking the best of the fresh figures would be the same curse one step later.
"1.000x" when no fresh figure's interval lies above 1.

`--also CONFIG` adds a row for a config in the tuner's form (`{"codegen": {...}, "passes": {...},
"runtime": {...}}`, as a campaign's JSON or `xtat show` gives it), measured like the others and
rechecked like them when it is among the fastest: the ceiling combines only its best `--top`
singles, and a tuned config that joins more global decisions, or one whose single rows are too
noisy to count, may hold more. Only its global part is measured (`jax.jit` takes no program
rewrite); the row says what it left out.

`--again FILE` measures the ceiling's config of a file this wrote (its "best") once more, as it was
measured there, and prints the file's figure beside today's: a ceiling is one day's measurement of a
machine whose one-CPU figures, for one, move by several percent from day to day. The file is not
changed; `--json` writes the new row.

    .venv/bin/python benchmarks/ceiling.py TARGET [--rounds 15] [--pairs 6] [--top 3] [--recheck 3] \
        [--also CONFIG_JSON]... [--json OUT.json]
    .venv/bin/python benchmarks/ceiling.py --again CEILING.json [--pairs 6] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import real_code  # noqa: E402  (a sibling benchmark: fresh measuring processes)


def _blocked(call, args, kwargs) -> None:
    import jax  # imported where it runs: a fresh measuring process sets its flags first

    jax.block_until_ready(call(*args, **kwargs))


def offered(target: str) -> dict[str, dict]:
    """The global decisions the tuner offers for this program: a name -> its probe, the compiler
    options ("options") and the process setup ("setup": `ProcessSetup`'s fields) it sets."""
    import jax

    from xtat.capture.targets import load_target
    from xtat.stages.codegen.space import codegen_space
    from xtat.stages.passes import SAFE
    from xtat.stages.runtime import runtime_decisions

    workload = load_target(target)
    with tempfile.TemporaryDirectory() as dump:
        dumping = {"xla_dump_to": dump, "xla_dump_hlo_pass_re": ".*"}
        jax.jit(workload.fn, **workload.jit_options, compiler_options=dumping).lower(
            *workload.args, **(workload.kwargs or {})).compile()
        ran = {m.group(1) for path in Path(dump).glob("*.txt")
               for m in [re.search(r"\.after_(.+?)\.before_", path.name)] if m}
    decisions = {f"passes.{name}=off": {"options": {"xla_disable_hlo_passes": name}, "setup": {}}
                 for name in sorted(ran & SAFE)}
    platform = jax.devices()[0].platform
    for decision in codegen_space(platform, allow_numerics_change=False).decisions:
        for value in decision.values:
            if value != decision.default:
                decisions[f"codegen.{decision.id}={value}"] = {"options": {decision.id: value}, "setup": {}}
    if platform == "cpu":  # the CPU count and host devices of an XLA:CPU process
        for decision in runtime_decisions():
            for value in decision.values:
                if value != decision.default:
                    decisions[f"runtime.{decision.id}={value}"] = {"options": {}, "setup": {decision.id: value}}
    return decisions


def config_probe(config: dict) -> tuple[dict, list[str]]:
    """A tuner's config as a probe of its global decisions, and what of it the probe leaves out.
    Vetted by the stages as a stored config is (it is input); a clear error names what is wrong."""
    import jax

    from xtat.stages.base import concretize
    from xtat.stages.codegen import CodegenStage
    from xtat.stages.passes import PassesStage
    from xtat.stages.runtime import RuntimeStage

    stages = (PassesStage(), CodegenStage(), RuntimeStage())
    if not isinstance(config, dict) or not all(isinstance(v, dict) for v in config.values()):
        raise SystemExit(f"--also: {config!r} is not a config: a JSON object of stage -> decision -> value")
    platform = jax.devices()[0].platform
    wrong = [problem for stage in stages
             for problem in stage.vet(config.get(stage.name, {}), platform, numerics_opt_in=False)]
    if wrong:
        raise SystemExit("--also: " + "; ".join(wrong))
    options = concretize(stages, config).compile_options  # the passes' and codegen's; the runtime's is a setup
    left_out = [f"{stage} ({len(values)} decisions)" for stage, values in config.items()
                if stage not in {s.name for s in stages} and values]
    return {"options": dict(options), "setup": dict(config.get(RuntimeStage.name, {}))}, left_out


def option_keys(name: str, decisions: dict[str, dict]) -> set[str]:
    """The options a decision sets, each disabled pass its own."""
    probe = decisions[name]
    return ({f"{key}:{value}" if key == "xla_disable_hlo_passes" else key for key, value in probe["options"].items()}
            | {f"runtime.{key}" for key in probe["setup"]})


def merged(probes: list[dict]) -> dict:
    """One probe from several decisions (disabled passes joined)."""
    out: dict = {"options": {}, "setup": {}}
    for probe in probes:
        for key, value in probe["options"].items():
            if key == "xla_disable_hlo_passes" and key in out["options"]:
                value = ",".join(sorted({*out["options"][key].split(","), *value.split(",")}))
            out["options"][key] = value
        out["setup"].update(probe["setup"])
    return out


def pair(target: str, options: dict, rounds: int, min_batch_s: float) -> dict:
    """The default and one set of options in this process: their speedup, and whether outputs agree."""
    import jax

    from xtat.capture.targets import load_target
    from xtat.runner.timing import interleaved, speedup_ci

    workload = load_target(target)
    args, kwargs = workload.args, workload.kwargs or {}
    builds = {"default": jax.jit(workload.fn, **workload.jit_options),
              "decision": jax.jit(workload.fn, **workload.jit_options, compiler_options=options)}
    same = verified(builds["default"], real_code.output_arrays(builds["decision"], args, kwargs), args, kwargs)
    times = interleaved({label: functools.partial(_blocked, call, args, kwargs)
                         for label, call in builds.items()}, rounds, min_sample_s=min_batch_s,
                        seed=int.from_bytes(os.urandom(4), "little"))
    ratio, low, high = speedup_ci(times["default"], times["decision"])
    return {"speedup": ratio, "low": low, "high": high, "same_outputs": same}


def verified(default, decision_outputs: list, args: tuple, kwargs: dict) -> bool:
    """Whether a decision's outputs pass the tuner's own check against the default's: the policy of
    `runner.verify` with the budget calibrated on one-ulp-perturbed inputs, as a worker calibrates it."""
    import jax
    import numpy as np

    from xtat.runner.verify import CALIBRATION_RUNS, Tolerance, calibrate, compare, perturbed

    leaves, tree = jax.tree.flatten((args, kwargs))

    def outputs(call, inputs: list) -> list:
        return real_code.output_arrays(call, *jax.tree.unflatten(tree, inputs))

    def moved(seed: int) -> list:
        return [perturbed([np.asarray(x)], seed)[0] if hasattr(x, "dtype") and jax.numpy.issubdtype(
            x.dtype, jax.numpy.floating) else x for x in leaves]

    reference = outputs(default, leaves)
    runs = [compare(outputs(default, moved(seed)), reference, Tolerance()) for seed in range(CALIBRATION_RUNS)]
    return compare(decision_outputs, reference, Tolerance(), calibrate(runs, len(reference))).ok


def measure_in_a_fresh_process(target: str, options: dict, rounds: int, min_batch_s: float) -> dict:
    done = subprocess.run([sys.executable, __file__, target, "--pair", json.dumps(options), "--rounds", str(rounds),
                           "--min-batch-s", str(min_batch_s)], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["exited with " + str(done.returncode)])[-1][:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_in_process_pairs(target: str, probe: dict, rounds: int, pairs: int, min_batch_s: float) -> dict:
    """A probe with a process setup: a process entering it against a default process, `pairs` pairs
    of fresh processes; its outputs checked here against this process's default build."""
    import jax
    import numpy as np

    from xtat.capture.targets import load_target

    candidate = real_code.serve_command(target, min_batch_s, "--options", json.dumps(probe["options"]),
                                        "--setup", json.dumps(probe["setup"]))
    with tempfile.TemporaryDirectory() as folder:
        saved = str(Path(folder) / "outputs.npz")
        try:
            measured = real_code.process_pairs(real_code.serve_command(target, min_batch_s), candidate, rounds,
                                               pairs, save=saved)
        except RuntimeError as error:
            return {"error": str(error)[:200]}
        with np.load(saved, allow_pickle=False) as data:
            outputs = [data[f"arr_{i}"] for i in range(len(data.files))]
    workload = load_target(target)
    default = jax.jit(workload.fn, **workload.jit_options)
    same = verified(default, outputs, workload.args, workload.kwargs or {})
    low, high = measured["ci"]
    return {"speedup": measured["speedup"], "low": low, "high": high, "same_outputs": same,
            "per_pair": measured["per_pair"]}


def above_one(row: dict) -> bool:
    """A row that counts: measured, the same outputs as the default's, its interval above 1 (a median
    above 1 alone may be noise)."""
    return "error" not in row and row["same_outputs"] and row["low"] > 1.0


def chosen(rows: dict[str, dict], rechecked: dict[str, dict]) -> str | None:
    """The ceiling's decision: of those measured again, the fastest by its first figure whose fresh
    figure's interval lies above 1 (chosen on one measurement, reported by another)."""
    for name in sorted((n for n in rechecked if n in rows), key=lambda n: -rows[n]["speedup"]):
        if above_one(rechecked[name]):
            return name
    return None


def measured(target: str, probe: dict, options: argparse.Namespace) -> dict:
    """One row: a probe with a process setup in pairs of fresh processes, any other in a fresh process."""
    if probe["setup"]:
        row = measure_in_process_pairs(target, probe, options.rounds, options.pairs, options.min_batch_s)
    else:
        row = measure_in_a_fresh_process(target, probe["options"], options.rounds, options.min_batch_s)
    return {**probe, **row}


def again(path: Path, options: argparse.Namespace) -> None:
    """`--again`: the file's ceiling config measured once more, beside the file's figure."""
    try:
        data = json.loads(path.read_text())
        target = data["target"]
        best = chosen(data["rows"], data["rechecked"])  # by today's rule, as the campaign reads the file
        recorded = data["rechecked"][best] if best else None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise SystemExit(f"--again: {path} is not a file benchmarks/ceiling.py --json wrote: {error}") from None
    if recorded is None:
        raise SystemExit(f"--again: {path} holds no ceiling config (its ceiling is 1.000x): nothing to measure")
    row = measured(target, {"options": recorded["options"], "setup": recorded["setup"]}, options)
    figure = row.get("error") or f"{row['speedup']:.3f}x [{row['low']:.3f}, {row['high']:.3f}]"
    print(f"{target}: {best}: the file's {recorded['speedup']:.3f}x [{recorded['low']:.3f}, {recorded['high']:.3f}]"
          f", today {figure}", flush=True)
    if options.json:
        Path(options.json).write_text(json.dumps({"target": target, "best": best, "file": str(path),
                                                  "recorded": recorded, "again": row}, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", nargs="?")
    parser.add_argument("--again", type=Path, metavar="CEILING.json",
                        help="measure that file's ceiling config once more (the file is not changed)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--min-batch-s", type=float, default=0.05)
    parser.add_argument("--pairs", type=int, default=6, help="pairs of fresh processes per runtime decision's row")
    parser.add_argument("--top", type=int, default=3, help="combine the best this many decisions")
    parser.add_argument("--recheck", type=int, default=3,
                        help="measure the best this many again, each in a fresh process: the ceiling is their best")
    parser.add_argument("--also", action="append", default=[], metavar="CONFIG_JSON",
                        help="a row for this config in the tuner's form too (its global part)")
    parser.add_argument("--json", help="also write every row here")
    parser.add_argument("--pair", help=argparse.SUPPRESS)  # internal: one fresh process's measurement
    options = parser.parse_args()
    if options.again is not None:
        again(options.again, options)
        return
    if options.target is None:
        parser.error("give a TARGET, or --again CEILING.json")
    if options.pair is not None:
        print(json.dumps(pair(options.target, json.loads(options.pair), options.rounds, options.min_batch_s)))
        return

    also: dict[str, dict] = {}  # read before anything is measured: a wrong one stops the run at once
    for number, text in enumerate(options.also, 1):
        try:
            probe, left_out = config_probe(json.loads(text))
        except json.JSONDecodeError as error:
            raise SystemExit(f"--also: {text[:80]!r} is not JSON: {error}") from None
        also[f"also {number}" + (f" (without {', '.join(left_out)})" if left_out else "")] = probe
    decisions = offered(options.target)
    print(f"{options.target}: {len(decisions)} global decisions, each in a fresh process, "
          f"{options.rounds} interleaved rounds (a runtime decision: {options.pairs} pairs of processes)", flush=True)
    rows: dict[str, dict] = {}

    def run(name: str, probe: dict, table: dict[str, dict] = rows, label: str = "") -> None:
        row = measured(options.target, probe, options)
        table[name] = row
        figure = row.get("error") or (f"{row['speedup']:.3f}x [{row['low']:.3f}, {row['high']:.3f}]"
                                      + ("" if row["same_outputs"] else "  outputs differ: not counted"))
        print(f"  {label}{name:{60 - len(label)}s} {figure}", flush=True)

    for name, probe in decisions.items():
        run(name, probe)
    for name, probe in also.items():
        run(name, probe)
    # The best value of each option, best first: two values of one option cannot be combined.
    winners: list[str] = []
    for name in sorted((n for n, r in rows.items() if n in decisions and above_one(r)),
                       key=lambda n: -rows[n]["speedup"]):
        if len(winners) < options.top and not any(option_keys(name, decisions) & option_keys(w, decisions)
                                                  for w in winners):
            winners.append(name)
    for size in range(2, len(winners) + 1):
        for combo in itertools.combinations(winners, size):
            run(" + ".join(combo), merged([decisions[n] for n in combo]))
    # The fastest of some 30 noisy rows is biased up (the winner's curse): the `--recheck` fastest whose
    # interval lies above 1 are measured again, each in a fresh process, and the ceiling is the fresh
    # figure of the fastest first figure among them (`chosen`).
    above = {n: r for n, r in rows.items() if above_one(r)}
    rechecked: dict[str, dict] = {}
    for name in sorted(above, key=lambda n: -above[n]["speedup"])[:options.recheck]:
        run(name, {"options": above[name]["options"], "setup": above[name]["setup"]}, rechecked, "again: ")
    best = chosen(rows, rechecked)
    if best is None:
        print("ceiling: 1.000x (no decision's interval lies above 1 when measured again)" if above else
              "ceiling: 1.000x (no decision's interval lies above 1)")
    else:
        r = rechecked[best]
        print(f"ceiling: {r['speedup']:.3f}x [{r['low']:.3f}, {r['high']:.3f}] with {best} (chosen on its first "
              f"figure, {rows[best]['speedup']:.3f}x; measured again)")
    if options.json:
        Path(options.json).write_text(json.dumps({"target": options.target, "rounds": options.rounds,
                                                  "rows": rows, "rechecked": rechecked, "best": best},
                                                 indent=1) + "\n")


if __name__ == "__main__":
    main()
