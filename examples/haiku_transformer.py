"""Haiku: one training step of a small transformer language model (`hk.transform`, optax).

    xtat tune examples/haiku_transformer.py:make --time 600
"""

from __future__ import annotations

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax

import xtat

VOCAB, DIM, HEADS, LAYERS, SEQUENCE = 64, 32, 2, 1, 16
OPTIMIZER = optax.adam(1e-3)


def _forward(tokens):
    x = hk.Embed(VOCAB, DIM)(tokens) + hk.get_parameter("position", (SEQUENCE, DIM), init=jnp.zeros)
    mask = jnp.tril(jnp.ones((SEQUENCE, SEQUENCE)))[None, None]
    for _ in range(LAYERS):
        h = hk.LayerNorm(axis=-1, create_scale=True, create_offset=True)(x)
        x = x + hk.MultiHeadAttention(HEADS, DIM // HEADS, w_init=hk.initializers.VarianceScaling(1.0))(
            h, h, h, mask=mask)
        h = hk.LayerNorm(axis=-1, create_scale=True, create_offset=True)(x)
        x = x + hk.Linear(DIM)(jax.nn.gelu(hk.Linear(4 * DIM)(h)))
    return hk.Linear(VOCAB)(x)


NETWORK = hk.without_apply_rng(hk.transform(_forward))


def train_step(params, opt_state, tokens):
    def loss_fn(params):
        logits = NETWORK.apply(params, tokens[:, :-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = OPTIMIZER.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state, loss


def batch(seed: int):
    return np.random.default_rng(seed).integers(0, VOCAB, (8, SEQUENCE + 1)).astype(np.int32)


def arguments(seed: int = 0) -> tuple[tuple, dict]:
    params = NETWORK.init(jax.random.PRNGKey(0), batch(0)[:, :-1])
    return (params, OPTIMIZER.init(params), batch(seed)), {}


step = train_step
JIT_OPTIONS: dict = {}


def make() -> xtat.Workload:
    args, kwargs = arguments()
    return xtat.Workload(step, args, kwargs, make_inputs=lambda seed: (*args[:2], batch(seed)))
