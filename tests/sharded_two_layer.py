"""A tiny two-layer model with named dimensions, for the sharding tests: run as a script in a process
with forced host devices (`XLA_FLAGS=--xla_force_host_platform_device_count=N`), it tunes the sharding
stage over every layout and prints the result as JSON."""

from __future__ import annotations

import json
import sys

import jax.numpy as jnp
import numpy as np

import xtat

D_MODEL, D_FF, D_OUT, BATCH = 32, 64, 16, 8


def two_layer(params, x):
    h = jnp.tanh(x @ params["w1"])
    y = h @ params["w2"]
    return jnp.mean(y**2), y


def dims() -> tuple:
    return ({"w1": xtat.dims("d_model", "d_ff"), "w2": xtat.dims("d_ff", "d_out")}, xtat.dims("batch", "d_model"))


def workload(declared: bool = True) -> xtat.Workload:
    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((D_MODEL, D_FF), dtype=np.float32) * 0.2,
              "w2": rng.standard_normal((D_FF, D_OUT), dtype=np.float32) * 0.2}
    x = rng.standard_normal((BATCH, D_MODEL), dtype=np.float32)
    return xtat.Workload(two_layer, (params, x), name="two_layer", dims=dims() if declared else None)


if __name__ == "__main__":
    from tiny import FAST

    declared = sys.argv[2] == "declared"
    result = xtat.tune(workload(declared), db=sys.argv[1], stages=("sharding",), strategy="grid", budget=60, **FAST)
    print(json.dumps({"trials": result.trials, "notes": result.notes, "adopted": result.adopted,
                      "config": result.best_config}))
