"""Plain JAX, laid out Mesh-TensorFlow style: an MLP train step whose inputs name their dimensions
(`xtat.dims`) and whose hidden activation is marked (`xtat.constrain`), for the sharding stage.

    XLA_FLAGS=--xla_force_host_platform_device_count=2 xtat tune examples/sharded_mlp.py:make \\
        --stages sharding --strategy grid --budget 7

On one device `xtat.constrain` returns its argument and the step is plain jax.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import xtat

BATCH, D_MODEL, D_FF = 64, 256, 1024


def train_step(params, x, y):
    def loss(p):
        h = xtat.constrain(jax.nn.gelu(x @ p["w_in"]), "batch", "d_ff")  # lay out the activation too
        return jnp.mean((h @ p["w_out"] - y) ** 2)

    value, grads = jax.value_and_grad(loss)(params)
    return jax.tree.map(lambda p, g: p - 1e-2 * g, params, grads), value


def data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((BATCH, D_MODEL), dtype=np.float32),
            rng.standard_normal((BATCH, D_MODEL), dtype=np.float32))


def arguments(seed: int = 0) -> tuple[tuple, dict]:
    rng = np.random.default_rng(100)
    params = {"w_in": rng.standard_normal((D_MODEL, D_FF), dtype=np.float32) / D_MODEL**0.5,
              "w_out": rng.standard_normal((D_FF, D_MODEL), dtype=np.float32) / D_FF**0.5}
    return (params, *data(seed)), {}


step = train_step
JIT_OPTIONS: dict = {}
DIMS = ({"w_in": xtat.dims("d_model", "d_ff"), "w_out": xtat.dims("d_ff", "d_model")},
        xtat.dims("batch", "d_model"), xtat.dims("batch", "d_model"))


def make() -> xtat.Workload:
    args, _ = arguments()
    return xtat.Workload(step, args, dims=DIMS, make_inputs=lambda seed: (args[0], *data(seed)))
