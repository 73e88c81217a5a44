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


def two_layer_marked(params, x):
    """The same model with its hidden activation marked: a layout lays it out by its names too."""
    h = xtat.constrain(jnp.tanh(x @ params["w1"]), "batch", "d_ff")
    y = h @ params["w2"]
    return jnp.mean(y**2), y


def dims() -> tuple:
    return ({"w1": xtat.dims("d_model", "d_ff"), "w2": xtat.dims("d_ff", "d_out")}, xtat.dims("batch", "d_model"))


def workload(declared: bool = True, fn=two_layer) -> xtat.Workload:
    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((D_MODEL, D_FF), dtype=np.float32) * 0.2,
              "w2": rng.standard_normal((D_FF, D_OUT), dtype=np.float32) * 0.2}
    x = rng.standard_normal((BATCH, D_MODEL), dtype=np.float32)
    return xtat.Workload(fn, (params, x), name=fn.__name__, dims=dims() if declared else None)


def deploy(db: str, fn=two_layer, layout: str = "data=2; batch:data") -> dict:
    """An adopted layout applied by xtat.jit: where its outputs live, whether they are the reference's, and
    how many sharding constraints its program has (the inputs' and the marked intermediates')."""
    import jax

    from records import adopt
    from xtat.capture.workload import capture

    w = workload(fn=fn)
    captured = capture(w)
    adopt(db, {"sharding": {"layout": layout}}, workload=w, name=fn.__name__,
          detail={"input_dims": [list(d) if d else None for d in captured.dims]})
    tuned = xtat.jit(fn, db=db)
    reference = jax.jit(fn)(*w.args)
    calls = [tuned(*w.args), tuned(*w.args)]  # the second through the installed fast path
    return {"found": [lookup.found.value for lookup in tuned.lookups()],
            "shardings": [list(out[1].sharding.spec) if hasattr(out[1].sharding, "spec") else "single"
                          for out in calls],
            "devices": [len(out[1].sharding.device_set) for out in calls],
            "constraints": constraints(tuned.lower(*w.args).as_text()),
            "equal": all(bool(np.allclose(np.asarray(out[1]), np.asarray(reference[1]), rtol=1e-5, atol=1e-6))
                         for out in calls)}


def constraints(module: str) -> int:
    """Sharding constraints in a module's text (Shardy's, or GSPMD's custom call)."""
    return module.count("sdy.sharding_constraint") + module.count("@Sharding")


def marked(db: str) -> dict:
    """The marked model: the constraints in the program exported per layout, every layout tuned and
    verified, and an adopted layout deployed by xtat.jit with its marked intermediate laid out."""
    import jax

    from tiny import FAST
    from xtat.capture.workload import capture
    from xtat.tuner import rewritten_exporter

    w = workload(fn=two_layer_marked)
    captured = capture(w)
    export = rewritten_exporter(captured)
    exported = {layout: constraints(jax.export.deserialize(bytearray(export({}, layout))).mlir_module())
                for layout in ("", "data=2; d_ff:data")}
    result = xtat.tune(w, db=db, stages=("sharding",), strategy="grid", budget=60, **FAST)
    return {"marks": [[list(names), list(shape)] for names, shape in captured.marks], "constraints": exported,
            "trials": result.trials, "notes": result.notes,
            "deploy": deploy(db + ".deploy", two_layer_marked, "data=2; d_ff:data")}


if __name__ == "__main__":
    from tiny import FAST

    if sys.argv[2] in ("deploy", "marked"):
        print(json.dumps({"deploy": deploy, "marked": marked}[sys.argv[2]](sys.argv[1])))
        sys.exit(0)
    declared = sys.argv[2] == "declared"
    result = xtat.tune(workload(declared), db=sys.argv[1], stages=("sharding",), strategy="grid", budget=60, **FAST)
    print(json.dumps({"trials": result.trials, "notes": result.notes, "adopted": result.adopted,
                      "config": result.best_config}))

