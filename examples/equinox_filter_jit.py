"""Equinox: an MLP trained with `eqx.filter_jit`, typed PRNG keys and optax.

The model holds non-array leaves (its activation function); `eqx.filter_jit`
traces the arrays and keeps everything else static. xtat splits the call the
same way, both when tuning and in `xtat.jit(train_step)`.

    xtat tune examples/equinox_filter_jit.py:make --time 600
    # then: train_step = xtat.jit(train_step)
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import xtat

OPTIMIZER = optax.adam(1e-3)


@eqx.filter_jit
def train_step(model, opt_state, x, y, key):
    key, dropout_key = jax.random.split(key)

    def loss_fn(model):
        hidden = jax.vmap(model)(x)
        keep = jax.random.bernoulli(dropout_key, 0.9, hidden.shape)  # output dropout
        return jnp.mean((jnp.where(keep, hidden / 0.9, 0.0) - y) ** 2)

    loss, grads = eqx.filter_value_and_grad(loss_fn)(model)
    updates, opt_state = OPTIMIZER.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, loss, key


def data(seed: int):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((64, 16), dtype=np.float32)
    return x, np.sin(x[:, :4])


def arguments(seed: int = 0) -> tuple[tuple, dict]:
    model = eqx.nn.MLP(16, 4, width_size=64, depth=2, activation=jax.nn.gelu, key=jax.random.key(0))
    opt_state = OPTIMIZER.init(eqx.filter(model, eqx.is_array))
    return (model, opt_state, *data(seed), jax.random.key(seed)), {}


step = train_step
JIT_OPTIONS: dict = {}


def make() -> xtat.Workload:
    args, kwargs = arguments()
    return xtat.Workload(step, args, kwargs, make_inputs=lambda seed: arguments(seed)[0])
