"""optax alone: ten AdamW steps of a linear regression, the loop inside the jitted function.

    xtat tune examples/optax_loop.py:make --time 600
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

import xtat

OPTIMIZER = optax.adamw(1e-2, weight_decay=1e-4)


def fit(params, opt_state, x, y, steps: int):
    def loss(p):
        return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)

    def one(_, carry):
        p, s = carry
        grads = jax.grad(loss)(p)
        updates, s = OPTIMIZER.update(grads, s, p)
        return optax.apply_updates(p, updates), s

    params, opt_state = jax.lax.fori_loop(0, steps, one, (params, opt_state))
    return params, opt_state, loss(params)


def data(seed: int):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((256, 32), dtype=np.float32)
    return x, x @ rng.standard_normal((32, 4), dtype=np.float32)


def arguments(seed: int = 0) -> tuple[tuple, dict]:
    params = {"w": jnp.zeros((32, 4)), "b": jnp.zeros(4)}
    return (params, OPTIMIZER.init(params), *data(seed)), {"steps": 10}


step = fit
JIT_OPTIONS = {"static_argnames": ("steps",)}


def make() -> xtat.Workload:
    args, kwargs = arguments()
    return xtat.Workload(step, args, kwargs, make_inputs=lambda seed: (*args[:2], *data(seed)), **JIT_OPTIONS)
