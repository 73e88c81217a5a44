"""Flax NNX: a model trained with `nnx.jit` in the usual in-place style, and its functional form.

`nnx.jit` writes module updates back into the Python objects it was given, which
a compiled program cannot do; NNX's own functional API (`nnx.split`/`nnx.merge`)
gives the same step as a pure function of the model's state. That form is what
xtat tunes and deploys; the in-place `train_step` stays for reference.

    xtat tune examples/flax_nnx.py:make --time 600
    # then: pure_step = xtat.jit(pure_step); state, loss = pure_step(state, x, y)
"""

from __future__ import annotations

import numpy as np
import optax
from flax import nnx

import xtat


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(32, 128, rngs=rngs)
        self.dropout = nnx.Dropout(0.1, rngs=rngs)
        self.out = nnx.Linear(128, 10, rngs=rngs)

    def __call__(self, x):
        return self.out(self.dropout(nnx.gelu(self.hidden(x))))


def _loss(model, x, y):
    return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()


@nnx.jit
def train_step(model, optimizer, x, y):
    """The in-place style: model and optimizer are updated where they are."""
    loss, grads = nnx.value_and_grad(_loss)(model, x, y)
    optimizer.update(model, grads)
    return loss


def data(seed: int):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((64, 32), dtype=np.float32), rng.integers(0, 10, 64).astype(np.int32)


def _objects():
    model = MLP(nnx.Rngs(0))  # its dropout key is a typed PRNG key in the state
    return model, nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)


GRAPHDEF, _ = nnx.split(_objects())


def pure_step(state, x, y):
    """The functional form of train_step: state in, new state and loss out."""
    model, optimizer = nnx.merge(GRAPHDEF, state)
    loss, grads = nnx.value_and_grad(_loss)(model, x, y)
    optimizer.update(model, grads)
    return nnx.state((model, optimizer)), loss


def arguments(seed: int = 0) -> tuple[tuple, dict]:
    _, state = nnx.split(_objects())
    return (state, *data(seed)), {}


step = pure_step
JIT_OPTIONS: dict = {}


def make() -> xtat.Workload:
    args, kwargs = arguments()
    return xtat.Workload(step, args, kwargs, make_inputs=lambda seed: (args[0], *data(seed)))
