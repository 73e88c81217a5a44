"""A preset's speedup through plain `jax.jit`, measured in a fresh process against `jax.jit` without it.

    .venv/bin/python benchmarks/preset_speedup.py PRESET.py TARGET [--name NAME] [--rounds 21]

PRESET.py is what `xtat export --preset python` wrote; TARGET names the
workload as for `xtat tune` (it supplies the function and its inputs); NAME
is its key in the preset's COMPILER_OPTIONS (default: the only key).
Both builds run interleaved (`runner.timing.interleaved`): a new random
order every round, each sample a calibrated batch of calls; the figure is the
median per-round ratio time(jax.jit) / time(jax.jit with the preset) with
the exact 95% interval of a median (`runner.timing.speedup_ci`).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import sys

import jax

from xtat.capture.targets import load_target
from xtat.runner.timing import interleaved, speedup_ci


def _blocked(call, args, kwargs) -> None:
    jax.block_until_ready(call(*args, **kwargs))


def load_preset(path: str):
    spec = importlib.util.spec_from_file_location("xtat_preset_under_test", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("preset")
    parser.add_argument("target")
    parser.add_argument("--name")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--min-batch-s", type=float, default=0.05)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    preset = load_preset(options.preset)
    names = list(preset.COMPILER_OPTIONS)
    name = options.name or (names[0] if len(names) == 1 else None)
    if name not in preset.COMPILER_OPTIONS:
        raise SystemExit(f"--name must be one of {names}")
    workload = load_target(options.target)
    args, kwargs = workload.args, workload.kwargs or {}
    builds = {"jax.jit": jax.jit(workload.fn, **workload.jit_options),
              "jax.jit + preset": jax.jit(workload.fn, **workload.jit_options,
                                          compiler_options=preset.COMPILER_OPTIONS[name])}
    for call in builds.values():
        jax.block_until_ready(call(*args, **kwargs))  # compiled before timing
    times = interleaved({label: functools.partial(_blocked, call, args, kwargs)
                         for label, call in builds.items()}, options.rounds, min_sample_s=options.min_batch_s)
    ratio, low, high = speedup_ci(times["jax.jit"], times["jax.jit + preset"])
    row = {"name": name, "options": preset.COMPILER_OPTIONS[name],
           "jax_ms": sorted(times["jax.jit"])[len(times["jax.jit"]) // 2] * 1e3,
           "preset_ms": sorted(times["jax.jit + preset"])[len(times["jax.jit + preset"]) // 2] * 1e3,
           "speedup": ratio, "speedup_ci": [low, high]}
    if options.json:
        sys.stdout.write(json.dumps(row) + "\n")
        return
    print(f"{name}: jax.jit {row['jax_ms']:.3f} ms, jax.jit with the preset {row['preset_ms']:.3f} ms, "
          f"speedup {ratio:.3f}x [{low:.3f}, {high:.3f}] ({options.rounds} interleaved rounds)")


if __name__ == "__main__":
    main()
