"""What a step's own host work does to decisions' figures: each config's speedup over jax.jit's default,
timed as the tuner's workers time a program (jitted over its flat input arrays) and as the user's step is
called (on its own argument tree, which jax takes apart on every call), in `--sets` sets of fresh
processes (`real_code.process_sets`: every process of a set interleaved round by round); and the share
of a call jax spends on that tree (`tuning.measure.argument_host_s` over the flat default's call), which
decides whether the tuner measures finalists as called (`AS_CALLED_SHARE`).

    .venv/bin/python benchmarks/as_called.py TARGET [--config CONFIG_JSON]... [--sets 8] [--rounds 11]

Without --config it prints the share alone.

CONFIG_JSON is a config in the tuner's form (its global part: passes, codegen, runtime), e.g.
'{"runtime": {"cpus": 1}}' or '{"passes": {"cpu-parallel-task-assigner": true}}'. TARGET names an
example file (examples/NAME.py) or a target as `xtat tune` names one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import real_code  # noqa: E402  (a sibling benchmark: fresh measuring processes)
from ceiling import config_probe  # noqa: E402


def host_share(source: str) -> tuple[float, float]:
    """jax's host work on the step's argument tree per call, and the flat default's call, in seconds."""
    import jax

    import xtat
    from xtat.tuning.measure import argument_host_s

    function, (args, kwargs), jit_options = real_code._program(source)
    step, inputs = real_code.flat_step(function, args, kwargs, jit_options)
    jax.block_until_ready(step(*inputs))
    best = float("inf")
    for _ in range(7):
        start, calls = time.perf_counter(), 0
        while time.perf_counter() - start < 0.05:
            jax.block_until_ready(step(*inputs))
            calls += 1
        best = min(best, (time.perf_counter() - start) / calls)
    _, dynamic_args, dynamic_kwargs = xtat.Workload(function, args, kwargs, **jit_options).bound()
    return argument_host_s(dynamic_args, dynamic_kwargs), best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target")
    parser.add_argument("--config", action="append", default=[], help="a config in the tuner's form (JSON)")
    parser.add_argument("--sets", type=int, default=8, help="sets of fresh processes per form")
    parser.add_argument("--rounds", type=int, default=11, help="interleaved rounds per set")
    options = parser.parse_args()
    source = options.target.removesuffix(":make") if options.target.endswith(".py:make") else options.target
    probes = {}
    for text in options.config:
        probe, left_out = config_probe(json.loads(text))
        if left_out:
            raise SystemExit(f"--config {text}: only global decisions can be measured here, not {left_out}")
        probes[text] = probe
    tree_s, call_s = host_share(source)
    print(f"{options.target}: the argument tree takes {tree_s * 1e6:.1f} us of the flat default's "
          f"{call_s * 1e6:.0f} us call ({tree_s / call_s:.1%})", flush=True)
    if not probes:
        return
    for form, extra in (("flat", ["--flat"]), ("as called", [])):
        commands = {"baseline": real_code.serve_command(source, 0.05, *extra)}
        for number, probe in enumerate(probes.values()):
            commands[f"config {number}"] = real_code.serve_command(
                source, 0.05, *extra, "--options", json.dumps(probe["options"]), "--setup", json.dumps(probe["setup"]))
        measured = real_code.process_sets(commands, options.rounds, options.sets)
        for number, text in enumerate(probes):
            row = measured[f"config {number}"]
            print(f"  {form:9s} {text:60s} {row['speedup']:.3f}x [{row['ci'][0]:.3f}, {row['ci'][1]:.3f}]",
                  flush=True)
        for key, row in measured.items():  # each two configs head to head: "A/B" is B's time over A's
            if "/" in key:
                first, second = (list(probes)[int(side.split()[1])] for side in key.split("/"))
                print(f"  {form:9s} {first} over {second}: {row['speedup']:.3f}x "
                      f"[{row['ci'][0]:.3f}, {row['ci'][1]:.3f}]", flush=True)


if __name__ == "__main__":
    main()
