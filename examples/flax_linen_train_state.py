"""Flax Linen: a small CNN trained with a `TrainState` (params, optax state, step counter).

`train_step(state, images, labels)` is the step users write with Flax's own
examples; `TrainState.apply_fn` and `.tx` are static fields, so only arrays
(and the Python int step count) are traced.

    xtat tune examples/flax_linen_train_state.py:make --time 600
    # then, in the training script: train_step = xtat.jit(train_step)
"""

from __future__ import annotations

import flax.linen as nn
import jax
import numpy as np
import optax
from flax.training import train_state

import xtat


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(16, (3, 3))(x))
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        x = nn.relu(nn.Conv(16, (3, 3))(x))
        x = x.reshape((x.shape[0], -1))
        return nn.Dense(10)(nn.relu(nn.Dense(64)(x)))


def train_step(state: train_state.TrainState, images, labels):
    def loss_fn(params):
        logits = state.apply_fn({"params": params}, images)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    return state.apply_gradients(grads=grads), loss


def batch(seed: int):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((32, 16, 16, 1), dtype=np.float32), rng.integers(0, 10, 32).astype(np.int32)


def arguments(seed: int = 0) -> tuple[tuple, dict]:
    images, labels = batch(seed)
    model = CNN()
    params = model.init(jax.random.key(0), images)["params"]
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))
    return (state, images, labels), {}


step = train_step
JIT_OPTIONS: dict = {}


def make() -> xtat.Workload:
    args, kwargs = arguments()
    return xtat.Workload(step, args, kwargs, make_inputs=lambda seed: (args[0], *batch(seed)))
