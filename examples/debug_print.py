"""A step with `jax.debug.print` inside: jax.export cannot carry host callbacks, so each worker
imports this file and traces the step itself; the prints run (and go to the worker's log).

(It prints a slice, not `x.mean()`: with jax 0.10.2 on CPU, printing a reduction of a value
that is also an output fails XLA's compile with "RET_CHECK failure ... is live and cannot be
removed", under plain jax.jit as well.)

    xtat tune examples/debug_print.py:make --time 600
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import xtat


def smooth(x, w):
    for i in range(4):
        x = jnp.tanh(x @ w) + x
        jax.debug.print("layer {i}: x[0, :4] = {v}", i=i, v=x[0, :4])
    return x


def arguments(seed: int = 0) -> tuple[tuple, dict]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((64, 128), dtype=np.float32),
            rng.standard_normal((128, 128), dtype=np.float32) * 0.05), {}


step = smooth
JIT_OPTIONS: dict = {}


def make() -> xtat.Workload:
    args, kwargs = arguments()
    return xtat.Workload(step, args, kwargs, make_inputs=lambda seed: arguments(seed)[0])
