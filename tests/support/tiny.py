"""Tiny real workloads for the tests: each compiles in well under a second."""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import numpy as np

import xtat


def mlp(w, x):
    for _ in range(3):
        x = jnp.tanh(x @ w)
    return x.sum(), x


def _mlp_inputs(seed: int):
    rng = np.random.default_rng(seed)
    return (np.random.default_rng(0).standard_normal((64, 64), dtype=np.float32) * 0.1,
            rng.standard_normal((32, 64), dtype=np.float32))


def tiny_mlp() -> xtat.Workload:
    return xtat.Workload(mlp, _mlp_inputs(0), name="tiny_mlp", make_inputs=_mlp_inputs)


def tiny_noisy_mlp() -> xtat.Workload:
    """tiny_mlp, made by code that writes to stdout, as Python (print) and as a C library would (fd 1)."""
    import os

    print("noise from the user's code (print)")
    os.write(1, b"noise from the user's code (fd 1)\n")
    return xtat.Workload(mlp, _mlp_inputs(0), name="tiny_noisy_mlp")


# Fast settings for tests: short samples, short deadlines, few rounds. The tests check what is
# decided, not how fast: a winner is adopted whatever else loads the test machine (the load
# rule has tests of its own, in test_tune.py).
# setup_error 0: a fixed 2 pairs of processes per setup factor. Under the test run's load a tiny
# program's pairs always disagree, and adding pairs to decide them only costs process starts.
FAST = dict(min_sample_s=0.005, samples=5, rounds=5, min_deadline_s=20.0, confirm_min_sample_s=0.005,
            adopt_under_load=True, setup_pairs=2, setup_error=0.0)


# Configs with executables of their own, on any CPU. Tests that need a config that builds
# another executable than the default's take one of these, never a codegen option: whether an
# option changes the machine code depends on the CPU (on an AVX-512 EPYC and Xeon, the vector
# width and the opt preset change nothing for tiny_mlp; issue 29). Each choice of the `chunks`
# knob computes the same values in that many row pieces, a dot (or reduce) per piece: another
# HLO program, so another executable wherever it compiles. The program stage sweeps knobs
# first, so with a budget of at most 5 a sweep's configs are the default, then chunks(2),
# chunks(4), chunks(8), chunks(16), in that order.
CHUNKS = (1, 2, 4, 8, 16)
CHUNKED = dict(stages=("program",), **FAST)


def chunks(n: int) -> dict:
    """The config that computes in `n` row pieces."""
    return {"program": {"knob:chunks": n}}


def by_rows(f, x):
    """f over row blocks of x, concatenated: f(x)'s values, in as many pieces as `chunks` says."""
    pieces = xtat.knob("chunks", CHUNKS, 1)
    return jnp.concatenate([f(part) for part in jnp.split(x, pieces, axis=0)], axis=0)


def chunked_matmul(a, b):
    """a @ b, in row pieces."""
    return by_rows(lambda rows: rows @ b, a)


def chunked_mlp(w, x):
    for _ in range(3):
        x = jnp.tanh(chunked_matmul(x, w))
    return x.sum(), x


def tiny_chunked_mlp() -> xtat.Workload:
    return xtat.Workload(chunked_mlp, _mlp_inputs(0), name="tiny_chunked_mlp", make_inputs=_mlp_inputs)


def nan_max(x):
    """NaN-sensitive: max propagates NaN; fast min/max does not."""
    return jnp.max(x, axis=1), jnp.min(x, axis=0)


def _nan_input():
    x = np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32)
    x[3, 5] = np.nan
    return x


def tiny_nan_max() -> xtat.Workload:
    return xtat.Workload(nan_max, (_nan_input(),), name="tiny_nan_max")


def chunked_nan_max(x):
    return by_rows(lambda part: jnp.max(part, axis=1), x), by_rows(lambda part: jnp.min(part, axis=1), x.T)


def tiny_chunked_nan_max() -> xtat.Workload:
    return xtat.Workload(chunked_nan_max, (_nan_input(),), name="tiny_chunked_nan_max")


def not_a_workload():
    return 42


def tiny_target(name: str) -> str:
    return f"{Path(__file__)}:{name}"
