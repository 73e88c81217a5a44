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


def deploy(db: str) -> dict:
    """An adopted layout applied by xtat.jit: where its outputs live, and whether they are the reference's."""
    import jax

    from records import adopt
    from xtat.workload import capture

    w = workload()
    captured = capture(w)
    adopt(db, {"sharding": {"layout": "data=2; batch:data"}}, workload=w, name="two_layer",
          detail={"input_dims": [list(d) if d else None for d in captured.dims]})
    tuned = xtat.jit(two_layer, db=db)
    reference = jax.jit(two_layer)(*w.args)
    calls = [tuned(*w.args), tuned(*w.args)]  # the second through the installed fast path
    return {"found": [lookup.found.value for lookup in tuned.lookups()],
            "shardings": [list(out[1].sharding.spec) if hasattr(out[1].sharding, "spec") else "single"
                          for out in calls],
            "devices": [len(out[1].sharding.device_set) for out in calls],
            "equal": all(bool(np.allclose(np.asarray(out[1]), np.asarray(reference[1]), rtol=1e-5, atol=1e-6))
                         for out in calls)}


if __name__ == "__main__":
    from tiny import FAST

    if sys.argv[2] == "deploy":
        print(json.dumps(deploy(sys.argv[1])))
        sys.exit(0)
    declared = sys.argv[2] == "declared"
    result = xtat.tune(workload(declared), db=sys.argv[1], stages=("sharding",), strategy="grid", budget=60, **FAST)
    print(json.dumps({"trials": result.trials, "notes": result.notes, "adopted": result.adopted,
                      "config": result.best_config}))

