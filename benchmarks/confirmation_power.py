"""How often `xtat tune` adopts a true win and a tie on a noisy program: the error rates of
confirmation (tuning/confirmation.py) measured with real tuning runs.

    .venv/bin/python benchmarks/confirmation_power.py win [--runs 20]
    .venv/bin/python benchmarks/confirmation_power.py tie [--runs 20]
    .venv/bin/python benchmarks/confirmation_power.py simulate [--runs 400]

The workload is a small convolution train step (two 3x3 convolutions on 16 images of
32x32x32, cross-entropy, SGD), so its noise is a convolution train step's. A knob adds
redundant work that XLA keeps and that does not change any output (three chained
convolutions of the images with a kernel made from a gradient, so they run after the
backward pass, whose sum selects between the loss and loss + 1 by a test no finite data
passes, so XLA cannot fold them away):

- `win`: knob `extra` in ("conv", "none"), default "conv": choosing "none" removes the
  extra convolutions, a true speedup of about 1.15x;
- `tie`: knob `extra` in ("conv-a", "conv-b"), default "conv-a": both add the same
  convolutions with a kernel of another sign: equally costly, different executables
  (checked).

First, both variants are timed as plain `jax.jit` in a fresh process, interleaved (the true
ratio, with its exact 95% interval). Then `xtat tune` runs `--runs` times (seeds 0..runs-1,
program stage only, each on a new database) and the adoptions are counted.

`simulate` prints the sequential design's operating characteristic instead
(`SequentialDesign.simulate`: simulated rounds, no measurement): the adoption rate by true
speedup and per-round noise, for the design and for one look of 21 rounds.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import xtat

CHOICES = {"win": ("conv", "none"), "tie": ("conv-a", "conv-b")}
WASTE_CONVS = 3  # sized so that the extra work costs about 15% of the step here
W_EXTRA = np.random.default_rng(99).normal(0, 0.1, (3, 3, 32, 32)).astype(np.float32)  # not a parameter: no gradient


def _conv(x, w):
    return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _blocked(fn: Callable, args: tuple) -> None:
    jax.block_until_ready(fn(*args))


def make_step(mode: str, choice: str | None = None):
    """The train step; `choice` fixed for the plain-jax check, else read from the knob."""
    redundant = {"conv": 1.0, "conv-a": 1.0, "conv-b": -1.0}

    def step(params, images, labels):
        extra = choice if choice is not None else xtat.knob("extra", CHOICES[mode], CHOICES[mode][0])

        def loss_fn(p):
            h = jax.nn.relu(_conv(images, p["w1"]))
            h = jax.nn.relu(_conv(h, p["w2"]))
            logits = h.mean(axis=(1, 2)) @ p["head"]
            loss = -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(labels, 10), axis=-1))
            return loss

        loss, grads = jax.value_and_grad(loss_fn)(params)
        if extra != "none":  # redundant work that XLA must keep and that changes no output
            # After the backward pass (it reads a gradient), so it cannot overlap the step's own work.
            waste = images
            for _ in range(WASTE_CONVS):
                waste = _conv(waste, grads["w2"] * redundant[str(extra)] + W_EXTRA)
            # A test the data never passes (finite sums stay far below 3e38), which XLA cannot fold.
            loss = jnp.where(jnp.sum(waste) > 3e38, loss + 1.0, loss)
        new = jax.tree.map(lambda p, g: p - 0.01 * g, params, grads)
        return loss, new

    return step


def inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    params = {"w1": rng.normal(0, 0.1, (3, 3, 32, 32)).astype(np.float32),
              "w2": rng.normal(0, 0.1, (3, 3, 32, 32)).astype(np.float32),
              "head": rng.normal(0, 0.1, (32, 10)).astype(np.float32)}
    images = rng.normal(size=(16, 32, 32, 32)).astype(np.float32)
    labels = rng.integers(0, 10, 16).astype(np.int32)
    return params, images, labels


def workload(mode: str) -> xtat.Workload:
    return xtat.Workload(make_step(mode), inputs(0), name=f"noisy-conv-{mode}",
                         make_inputs=lambda seed: inputs(seed + 1))


def plain_jax_ratio(mode: str, rounds: int) -> dict:
    """Both variants under plain jax.jit in this (fresh) process, interleaved."""
    from xtat.build.builder import executable_identity
    from xtat.runner.timing import interleaved, speedup_ci

    default, other = CHOICES[mode]
    args = inputs(0)
    fns = {c: jax.jit(make_step(mode, c)) for c in (default, other)}
    hashes = {c: executable_identity(fns[c].lower(*args).compile()) for c in fns}
    calls: dict[str, Callable[[], None]] = {c: functools.partial(_blocked, fns[c], args) for c in fns}
    samples = interleaved(calls, rounds, seed=random.randrange(2**31))
    speedup, low, high = speedup_ci(samples[default], samples[other])
    same_outputs = all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(fns[default](*args)),
                                                            jax.tree.leaves(fns[other](*args))))
    return {"speedup": speedup, "ci": [low, high], "default_ms": float(np.median(samples[default])) * 1e3,
            "different_executables": hashes[default] != hashes[other], "same_outputs": same_outputs}


def operating_characteristic(runs: int) -> None:
    from xtat.tuning.confirmation import SequentialDesign, Verdict

    designs = {"sequential (6 looks)": SequentialDesign(1.02), "one look of 21": SequentialDesign(1.02, max_looks=1)}
    print(f"adopted fraction of {runs} simulated confirmations (tie margin 2%, alpha 0.05)")
    print("per-round sd | true speedup | " + " | ".join(designs))
    for spread in (0.05, 0.10, 0.15, 0.20):
        for true in (1.00, 1.02, 1.05, 1.10, 1.15):
            row = []
            for design in designs.values():
                verdicts = design.simulate(true, spread, runs, seed=int(spread * 1000 + true * 100))
                row.append(f"{verdicts.count(Verdict.FASTER) / runs:.3f}")
            print(f"{spread:.2f} | {true:.2f} | " + " | ".join(row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=sorted(CHOICES) + ["simulate"])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=41, help="rounds of the plain jax.jit check")
    parser.add_argument("--check-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode == "simulate":
        operating_characteristic(args.runs)
        return
    if args.check_only:
        print(json.dumps(plain_jax_ratio(args.mode, args.rounds)))
        return
    check = json.loads(subprocess.run([sys.executable, __file__, args.mode, "--check-only", "--rounds",
                                       str(args.rounds)], capture_output=True, text=True, check=True).stdout)
    print(f"plain jax.jit, fresh process: {CHOICES[args.mode][1]!r} is {check['speedup']:.3f}x "
          f"[{check['ci'][0]:.3f}, {check['ci'][1]:.3f}] against {CHOICES[args.mode][0]!r} "
          f"({check['default_ms']:.1f} ms); different executables: {check['different_executables']}; "
          f"identical outputs: {check['same_outputs']}", flush=True)
    adopted, started = 0, time.perf_counter()
    for seed in range(args.runs):
        with tempfile.TemporaryDirectory() as folder:
            result = xtat.tune(workload(args.mode), db=Path(folder) / "xtat.db", stages=("program",), budget=3,
                               seed=seed)
        adopted += result.adopted
        rounds = result.confirmation.rounds if result.confirmation else 0
        print(f"seed {seed:2d}: {'ADOPTED' if result.adopted else 'not adopted'}  {result.speedup:.3f}x "
              f"[{result.speedup_ci[0]:.3f}, {result.speedup_ci[1]:.3f}]  rounds {rounds}  "
              f"{result.message[:90]}", flush=True)
    print(f"{args.mode}: adopted in {adopted} of {args.runs} runs ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
