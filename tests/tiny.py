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


def nan_max(x):
    """NaN-sensitive: max propagates NaN; fast min/max does not."""
    return jnp.max(x, axis=1), jnp.min(x, axis=0)


def tiny_nan_max() -> xtat.Workload:
    x = np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32)
    x[3, 5] = np.nan
    return xtat.Workload(nan_max, (x,), name="tiny_nan_max")


def not_a_workload():
    return 42


def tiny_target(name: str) -> str:
    return f"{Path(__file__)}:{name}"


# Fast settings for tests: short samples, short deadlines, few rounds. The tests check what is
# decided, not how fast: a winner is adopted whatever else loads the test machine (the load
# rule has tests of its own, in test_tune.py).
FAST = dict(min_sample_s=0.005, samples=5, rounds=5, min_deadline_s=20.0, confirm_min_sample_s=0.005,
            adopt_under_load=True)
