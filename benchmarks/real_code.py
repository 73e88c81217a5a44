"""Delivered speedup on real code: every gallery program tuned, then measured through `xtat.jit`.

    .venv/bin/python benchmarks/real_code.py [--time 600] [--pairs 6] [--rounds 11] [--only NAME,...] [--json OUT]
    .venv/bin/python benchmarks/real_code.py --untuned [--only NAME,...]   (xtat.jit's dispatch alone)

Each program in `examples/` is tuned with the default strategy and stages
under a time budget a user would give (`--time` seconds of search, each into
its own store). Then a fresh process imports the example, as its user's script
would, and times `xtat.jit(step)` (what the store says is applied) against
plain `jax.jit(step)` (for an `equinox.filter_jit` step: the step itself) in
another fresh process, interleaved sample by sample in a new random order
every round, in `--pairs` such pairs of processes (a process's own placement
moves its speed by more than many wins are worth). The table gives per program
the trials, the adopted config, the search's (confirmed) speedup and the
delivered one, with 95% intervals, and the geometric mean of the delivered
speedups. A program whose adopted config has runtime decisions gets them only
under `xtat run`, so its xtat.jit process is started with `xtat run` (its
deploy path) and its jax.jit process as the user's would be (the row says so).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(f"gallery_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _program(source: str):
    """(step, (args, kwargs), jit options) of an example file, or of a TARGET as `xtat tune` names one
    (`suite:gpt/train`), whose workload's function is the step."""
    if source.endswith(".py"):
        module = _module(Path(source))
        return module.step, module.arguments(), module.JIT_OPTIONS
    from xtat.capture.targets import load_target

    workload = load_target(source)
    options = {name: getattr(workload, name) for name in ("static_argnums", "static_argnames", "donate_argnums",
                                                          "donate_argnames") if getattr(workload, name) is not None}
    return workload.fn, (workload.args, workload.kwargs or {}), options


def serve(example: str, db: str | None, min_sample_s: float, options: dict | None = None, flat: bool = False) -> None:
    """A fresh process holding one build of the example's step: `xtat.jit(step)` with the store
    (`db`), or plain `jax.jit(step)` without (with `options` as its compiler options when given);
    `flat`: the step as the tuner's workers time it, jitted over its flat input arrays
    (`capture.arguments.flat_function`), so no call takes the user's argument tree apart.
    Prints what the lookup said, then per line it reads one timed sample ("sample"), or the step's
    outputs saved to an .npz file ("save PATH"), so the parent can interleave two such processes."""
    import warnings

    import jax
    import numpy as np

    import xtat
    from xtat.capture.arguments import filtered_call, filtered_result, partition, unwrap_jit
    from xtat.runner.timing import TimingPolicy, calibrate, sample

    # The protocol gets a private copy of stdout; the program's own prints (jax.debug.print) go to stderr.
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    function, (args, kwargs), jit_options = _program(example)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        step: Any  # xtat.jit's wrapper (it has `lookups`) or jax.jit's
        if flat:
            step, args = flat_step(function, args, kwargs, jit_options, options)
            kwargs = {}
        elif db is not None:
            step = xtat.jit(function, db=db, **jit_options)
        elif options and unwrap_jit(function).filtered:  # equinox.filter_jit: split as xtat.jit splits it
            split = jax.jit(filtered_call(unwrap_jit(function).fn), static_argnums=(1,), compiler_options=options)

            def step(*args: Any, **kwargs: Any) -> Any:
                return filtered_result(split(*partition(args, kwargs)))
        elif options:
            step = jax.jit(function, **jit_options, compiler_options=options)
        else:
            step = function if unwrap_jit(function).filtered else jax.jit(function, **jit_options)
        jax.block_until_ready(step(*args, **kwargs))

    def call() -> None:
        jax.block_until_ready(step(*args, **kwargs))

    inner = calibrate(call, TimingPolicy(min_sample_s=min_sample_s))
    found = [lookup.found.value for lookup in step.lookups()] if db is not None else []
    print(json.dumps({"found": found, "warnings": [str(w.message) for w in said]}), file=protocol, flush=True)
    for line in sys.stdin:
        if line.startswith("save "):
            np.savez(line[5:].strip(), *output_arrays(step, args, kwargs))
            print("saved", file=protocol, flush=True)
        else:
            print(sample(call, inner), file=protocol, flush=True)


def flat_step(function: Callable, args: tuple, kwargs: dict, jit_options: dict,
              options: dict | None = None) -> tuple[Callable, tuple]:
    """A step as the tuner's workers time it: jitted (with `options` as compiler options) over the flat
    arrays of its dynamic leaves (`capture.arguments.flat_function`), and those arrays on the device."""
    import jax

    import xtat
    from xtat.capture.arguments import flat_function, input_leaves

    fn, dynamic_args, dynamic_kwargs = xtat.Workload(function, args, kwargs, **jit_options).bound()
    leaves, arrays = input_leaves(dynamic_args, dynamic_kwargs, "args")
    flat, _ = flat_function(fn, dynamic_args, dynamic_kwargs, leaves)
    return jax.jit(flat, compiler_options=options or None), tuple(jax.device_put(a) for a in arrays)


def output_arrays(call: Callable, args: tuple, kwargs: dict) -> list:
    """A step's outputs as numpy arrays (typed PRNG keys as their data), in leaf order."""
    import jax
    import numpy as np

    return [np.asarray(jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x)
            for x in jax.tree.leaves(jax.block_until_ready(call(*args, **kwargs)))]


@contextlib.contextmanager
def serving(commands: dict[str, list[str]]) -> Iterator[tuple[dict[str, subprocess.Popen], dict[str, dict]]]:
    """One fresh process per command (a `--serve` process, or one started through `xtat run`), each
    read until it says it is ready; yields the processes and what each said, and kills them after."""
    errors = {label: tempfile.TemporaryFile("w+") for label in commands}  # what each says went wrong
    processes = {label: subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=errors[label], text=True)
                 for label, command in commands.items()}
    try:
        ready = {}
        for label, process in processes.items():
            line = process.stdout.readline()  # type: ignore[union-attr]
            while line and not line.startswith("{"):  # `xtat run` says what it applied first
                line = process.stdout.readline()  # type: ignore[union-attr]
            if not line:
                errors[label].seek(0)
                said = errors[label].read().strip().splitlines()[-5:]
                raise RuntimeError(f"the {label} process ({' '.join(commands[label])}) failed to start "
                                   f"(exit status {process.wait()}): " + " / ".join(said))
            ready[label] = json.loads(line)
        yield processes, ready
    finally:
        for process in processes.values():
            process.kill()
        for error in errors.values():
            error.close()


def sampler(process: subprocess.Popen, settle: int = 1) -> Callable[[], float]:
    """One timed sample of a `serving` process, asked for and read back, after `settle` samples taken
    and dropped. Each turn of `interleave` follows another process's turn, and a process's first
    sample after that reads slow, the more so the more threads it has: the default's by 5-13% on
    Haiku's step against 2-4% for a one-CPU process, which read one CPU 1.138x there on first
    samples against 1.051x on the next (`benchmarks/switch_bias.py`). The tuner's placements drop
    that sample too (`ProcessPlacement.sample_pairs`), so the two time the same steady state."""
    def ask() -> float:
        process.stdin.write("sample\n")  # type: ignore[union-attr]
        process.stdin.flush()  # type: ignore[union-attr]
        return float(process.stdout.readline())  # type: ignore[union-attr]

    def one() -> float:
        for _ in range(settle):
            ask()
        return ask()
    return one


def _one_set(commands: dict[str, list[str]], rounds: int, save: str | None = None) -> tuple[dict, dict[str, list]]:
    """One set of fresh processes (a "baseline" and the others), interleaved round by round; `save`:
    the "candidate" process's outputs are saved there (.npz) after its rounds. Returns what each
    process said when it was ready, and each one's samples."""
    from xtat.runner.timing import interleave

    with serving(commands) as (processes, ready):
        samples = interleave({label: sampler(process) for label, process in processes.items()}, rounds)
        if save is not None:
            candidate = processes["candidate"]
            candidate.stdin.write(f"save {save}\n")  # type: ignore[union-attr]
            candidate.stdin.flush()  # type: ignore[union-attr]
            if candidate.stdout.readline().strip() != "saved":  # type: ignore[union-attr]
                raise RuntimeError("the candidate process failed to save its outputs")
    return ready, samples


def process_sets(commands: dict[str, list[str]], rounds: int, sets: int, save: str | None = None) -> dict[str, dict]:
    """`sets` sets of fresh processes, one started by each command (a `--serve` process, or one started
    through `xtat run`), one set after another, interleaved round by round within a set; a process's
    turn drops one sample and keeps the next (`sampler`).

    A process is the unit here, not a round: two processes holding the same
    executable differed by up to 24% on this machine (heap and code placement),
    steadily over all their rounds, so rounds of one set cannot show it. Each
    set gives each command but "baseline" one speedup over the baseline (the
    median ratio of its rounds); its speedup is their geometric mean, and its
    interval the t interval of the log speedups across sets, which holds the
    process-to-process spread. Also, for each two such commands, the speedup of
    one over the other measured the same way (`"A/B"`: B's time over A's).
    `save`: the first "candidate" process saves its outputs there."""
    others = [label for label in commands if label != "baseline"]
    per_set: dict[str, list[float]] = {}
    ready: dict = {}
    versus = [(label, "baseline") for label in others] + [(a, b) for i, a in enumerate(others) for b in others[i + 1:]]
    for index in range(sets):
        ready, samples = _one_set(commands, rounds, save if index == 0 else None)
        for label, against in versus:
            key = label if against == "baseline" else f"{label}/{against}"
            per_set.setdefault(key, []).append(
                float(statistics.median(b / c for b, c in zip(samples[against], samples[label]))))
    out = {}
    for key, ratios in per_set.items():
        speedup, low, high = across_pairs(ratios)
        out[key] = {"speedup": speedup, "ci": [low, high], "per_pair": ratios, **ready.get(key, {})}
    return out


def process_pairs(baseline: list[str], candidate: list[str], rounds: int, pairs: int,
                  save: str | None = None) -> dict:
    """`process_sets` of two commands: the candidate's speedup over the baseline, across `pairs` pairs of
    fresh processes, and what the candidate process said when it was ready."""
    return process_sets({"baseline": baseline, "candidate": candidate}, rounds, pairs, save)["candidate"]


def across_pairs(per_pair: list[float]) -> tuple[float, float, float]:
    """The geometric mean of per-pair ratios and the 95% t interval of their logs (a pair of
    processes is the unit: `process_pairs`); a point interval for one pair."""
    from scipy import stats

    logs = [math.log(s) for s in per_pair]
    centre = statistics.fmean(logs)
    if len(logs) > 1:
        half = float(stats.t.ppf(0.975, len(logs) - 1)) * statistics.stdev(logs) / math.sqrt(len(logs))
    else:
        half = 0.0
    return math.exp(centre), math.exp(centre - half), math.exp(centre + half)


def serve_command(example: Path | str, min_sample_s: float, *extra: str) -> list[str]:
    """The command of a fresh measuring process (`serve`) of this file."""
    return [sys.executable, __file__, "--serve", str(example), "--min-sample", str(min_sample_s), *extra]


def delivered(example: Path | str, db: Path, runtime: bool, rounds: int, pairs: int,
              min_sample_s: float = 0.05, beside: dict | None = None) -> dict:
    """xtat.jit of the step in a fresh process (started by `xtat run` when the adopted config has
    runtime decisions: its deploy path) against plain jax.jit in another (`process_pairs`).

    `beside`: another config's probe ({"options": compiler options, "setup": a runtime setup}, as
    `benchmarks/ceiling.py` writes them), measured in a third process of each set, interleaved with
    the two: `beside` is its speedup over jax.jit, and `delivered_over_beside` xtat.jit's over it, both
    from the same rounds as the delivered figure (so a day's drift does not fall between them)."""
    base = serve_command(example, min_sample_s)
    tuned = base + ["--db", str(db)]
    if runtime:
        tuned = [sys.executable, "-c", "from xtat.cli.app import main; main()", "run", "--db", str(db), "--",
                 *tuned]
    if beside is None:
        measured = process_pairs(base, tuned, rounds, pairs)
        return {"delivered": measured.pop("speedup"), "delivered_ci": measured.pop("ci"), **measured}
    other = serve_command(example, min_sample_s, "--options", json.dumps(beside["options"]),
                          "--setup", json.dumps(beside["setup"]))
    sets = process_sets({"baseline": base, "candidate": tuned, "beside": other}, rounds, pairs)
    measured = sets["candidate"]
    return {"delivered": measured.pop("speedup"), "delivered_ci": measured.pop("ci"), **measured,
            "beside": [sets["beside"]["speedup"], *sets["beside"]["ci"]],
            "delivered_over_beside": [sets["candidate/beside"]["speedup"], *sets["candidate/beside"]["ci"]]}


def tune_and_measure(example: Path, folder: Path, time_s: float, rounds: int, pairs: int) -> dict:
    import xtat
    from xtat.capture.targets import load_target

    db = folder / f"{example.stem}.db"
    result = xtat.tune(load_target(f"{example}:make"), db=db, time_s=time_s)
    runtime = bool(result.adopted and result.best_config.get("runtime"))
    return {"program": example.stem, "trials": result.trials, "adopted": result.adopted,
            "config": result.best_config if result.adopted else None,
            "search": result.speedup, "search_ci": list(result.speedup_ci), "under_xtat_run": runtime,
            "message": result.message, **delivered(example, db, runtime, rounds, pairs)}


def _table(rows: list[dict]) -> str:
    lines = ["| program | trials | adopted config | search speedup [95% CI] | delivered speedup [95% CI] |",
             "|---|---|---|---|---|"]
    for r in rows:
        trials = ", ".join(f"{k} {v}" for k, v in sorted(r["trials"].items()))
        config = json.dumps(r["config"]) if r["config"] else "none"
        if r["under_xtat_run"]:
            config += " (measured under `xtat run`)"
        lines.append(f"| {r['program']} | {trials} | {config} | {r['search']:.3f} [{r['search_ci'][0]:.3f}, "
                     f"{r['search_ci'][1]:.3f}] | {r['delivered']:.3f} [{r['delivered_ci'][0]:.3f}, "
                     f"{r['delivered_ci'][1]:.3f}] |")
    geomean = math.exp(sum(math.log(r["delivered"]) for r in rows) / len(rows))
    lines.append(f"\nGeometric mean of the delivered speedups over {len(rows)} programs: {geomean:.3f}x")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time", type=float, default=600.0, help="search seconds per program")
    parser.add_argument("--rounds", type=int, default=11, help="interleaved rounds per pair of measuring processes")
    parser.add_argument("--pairs", type=int, default=6, help="pairs of fresh measuring processes per program")
    parser.add_argument("--only", help="comma-separated example names (default: all)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--untuned", action="store_true",
                        help="tune nothing: xtat.jit with an empty store against the step, what xtat.jit's "
                             "own dispatch gives (an eqx.filter_jit step partitions its arguments per call)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)  # a fresh measuring process
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--min-sample", type=float, default=0.05, help=argparse.SUPPRESS)
    parser.add_argument("--options", help=argparse.SUPPRESS)  # compiler options of the served jax.jit (JSON)
    parser.add_argument("--setup", help=argparse.SUPPRESS)  # a ProcessSetup entered first (JSON of its fields)
    parser.add_argument("--flat", action="store_true", help=argparse.SUPPRESS)  # over flat arrays (`serve`)
    options = parser.parse_args()
    if options.serve:
        if options.setup:
            from xtat.core.candidate import ProcessSetup

            ProcessSetup(**json.loads(options.setup)).enter()  # before any jax backend starts
        serve(options.serve, options.db, options.min_sample, json.loads(options.options or "{}"), options.flat)
        return
    names = options.only.split(",") if options.only else sorted(p.stem for p in EXAMPLES.glob("*.py"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="xtat-real-code-") as folder:
        if options.untuned:
            for name in names:
                m = delivered(EXAMPLES / f"{name}.py", Path(folder) / f"{name}-empty.db", False, options.rounds,
                              options.pairs)
                print(f"{name}: xtat.jit untuned {m['delivered']:.3f}x [{m['delivered_ci'][0]:.3f}, "
                      f"{m['delivered_ci'][1]:.3f}] (pairs: {', '.join(f'{s:.3f}' for s in m['per_pair'])})")
            return
        for name in names:
            rows.append(tune_and_measure(EXAMPLES / f"{name}.py", Path(folder), options.time, options.rounds,
                                         options.pairs))
            print(f"{name}: {rows[-1]['message']}; delivered {rows[-1]['delivered']:.3f}x "
                  f"[{rows[-1]['delivered_ci'][0]:.3f}, {rows[-1]['delivered_ci'][1]:.3f}] "
                  f"(pairs: {', '.join(f'{s:.3f}' for s in rows[-1]['per_pair'])})", flush=True)
    print(_table(rows))
    if options.json:
        options.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
