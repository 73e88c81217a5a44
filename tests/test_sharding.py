"""The sharding stage: layouts of named dimensions over a mesh, their enumeration, and a tiny two-layer
model tuned over every layout on forced host devices (real XLA, real SPMD partitioning)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import xtat
from sharded_two_layer import BATCH, D_FF, D_MODEL, D_OUT, two_layer_marked, workload
from xtat.capture.workload import capture
from xtat.core.candidate import Candidate
from xtat.core.errors import UserError
from xtat.stages.base import Context
from xtat.stages.registry import STAGE_ORDER
from xtat.stages.sharding import ShardingStage
from xtat.stages.sharding.layouts import Layout, enumerate_layouts, meshes, partition_spec
from xtat.store.sql import Store

TESTS = Path(__file__).parent / "support"
TWO_LAYER = [(("d_model", "d_ff"), (D_MODEL, D_FF)), (("d_ff", "d_out"), (D_FF, D_OUT)),
             (("batch", "d_model"), (BATCH, D_MODEL))]
# Every valid layout of the two-layer model on two devices, worked out by hand: one mesh axis, each
# name on it or not, never two names of one array on it.
ON_TWO = {"data=2; batch:data", "data=2; d_model:data", "data=2; d_ff:data", "data=2; d_out:data",
          "data=2; batch:data, d_ff:data", "data=2; batch:data, d_out:data", "data=2; d_model:data, d_out:data"}


def test_meshes_are_the_factorisations_of_the_device_count():
    assert meshes(2) == [(("data", 2),)]
    assert meshes(4) == [(("data", 4),), (("data", 2), ("model", 2))]
    assert meshes(8) == [(("data", 8),), (("data", 2), ("model", 4)), (("data", 4), ("model", 2))]


def test_every_valid_layout_and_no_other():
    layouts = enumerate_layouts(TWO_LAYER, 2)
    assert layouts[0].notation() == "data=2; replicated"
    assert {layout.notation() for layout in layouts[1:]} == ON_TWO
    four = enumerate_layouts(TWO_LAYER, 4)
    assert len({layout.notation() for layout in four}) == len(four)
    for layout in four:
        mapping = dict(layout.rules)
        for names, _ in TWO_LAYER:  # never two axes of one array on one mesh axis
            used = [mapping[n] for n in names if n in mapping]
            assert len(used) == len(set(used)), layout.notation()
    assert "data=2,model=2; batch:data, d_ff:model" in {layout.notation() for layout in four}


def test_layouts_that_do_not_divide_are_not_offered():
    odd = [(("batch", "d_model"), (6, 32))]  # 6 splits two ways, not four
    assert {layout.notation() for layout in enumerate_layouts(odd, 2)[1:]} == {"data=2; batch:data",
                                                                              "data=2; d_model:data"}
    on_four = {layout.notation() for layout in enumerate_layouts(odd, 4)}
    assert "data=4; batch:data" not in on_four and "data=4; d_model:data" in on_four
    assert "data=2,model=2; batch:data, d_model:model" in on_four
    assert enumerate_layouts([(("batch",), (3,))], 2)[1:] == []


def test_notation_round_trips_and_refuses_what_is_not_a_layout():
    for layout in enumerate_layouts(TWO_LAYER, 4):
        assert Layout.parse(layout.notation()) == layout
    for text in ("batch:data", "data=2; batch:rows", "model=2,data=2; batch:data", "data=1; batch:data",
                 "data=two; batch:data"):
        with pytest.raises(UserError):
            Layout.parse(text)
    assert partition_spec(Layout.parse("data=2,model=2; batch:data, d_ff:model"), ("batch", "d_model", "d_ff")) \
        == ("data", None, "model")


def _context(devices: int, declared: bool = True, fn=None) -> Context:
    captured = capture(workload(declared) if fn is None else workload(declared, fn))
    return Context(lambda: None, (), {}, "cpu", False, None, lambda c: [], lambda c: "", devices,
                   tuple(zip(captured.dims, (tuple(x.shape) for x in captured.inputs), strict=True)),
                   captured.dims_declared, tuple(captured.marks))


def test_the_stage_orders_before_the_program_stage_and_decides_one_layout():
    assert STAGE_ORDER.index("runtime") < STAGE_ORDER.index("sharding") < STAGE_ORDER.index("program")
    stage = ShardingStage()
    assert stage.discover(_context(1), {}, []) == []  # one device: nothing to lay out
    (decision,) = stage.discover(_context(2), {}, [])
    assert decision.default == "" and set(decision.values) == {"", *ON_TWO}
    assert stage.notes() == ["sharding: 7 valid layout(s) on 2 devices"]
    assert stage.apply({"layout": "data=2; d_ff:data"}, Candidate()).layout == "data=2; d_ff:data"
    assert stage.apply({}, Candidate()) == Candidate()
    assert stage.vet({"layout": "data=2; d_ff:data"}, "cpu", False) == []
    assert stage.vet({"layout": "rm -rf /"}, "cpu", False) and stage.vet({"mesh": 2}, "cpu", False)


def test_without_declarations_layouts_are_batch_only():
    stage = ShardingStage()
    (decision,) = stage.discover(_context(2, declared=False), {}, [])
    assert decision.values == ("", "data=2; batch:data")  # the leading axis of the last argument
    assert "declares no dimensions" in stage.notes()[0]


def test_constrain_is_the_identity_outside_a_placement_and_checks_its_rank():
    x = np.ones((4, 6), np.float32)
    assert xtat.constrain(x, "batch", None) is x
    with pytest.raises(UserError, match="names 1 axes of an array of shape"):
        xtat.constrain(x, "batch")
    with pytest.raises(UserError, match="fails to trace"):
        capture(xtat.Workload(lambda a: xtat.constrain(a * 2, "batch"), (x,)))


def test_marked_intermediates_join_the_enumeration():
    context = _context(2, fn=two_layer_marked)
    assert context.marks == ((("batch", "d_ff"), (BATCH, D_FF)),)
    stage = ShardingStage()
    (decision,) = stage.discover(context, {}, [])
    # The hidden activation is (batch, d_ff): the two names may no longer share the one mesh axis.
    assert set(decision.values) == {"", *ON_TWO} - {"data=2; batch:data, d_ff:data"}
    assert stage.notes() == ["sharding: 6 valid layout(s) on 2 devices, 1 marked intermediate(s) laid out by each"]
    odd = replace(context, marks=((("batch", "d_ff"), (BATCH, D_FF - 1)),))  # a d_ff two devices do not divide
    (decision,) = stage.discover(odd, {}, [])
    assert not any("d_ff" in str(value) for value in decision.values)


def test_a_layout_is_part_of_the_program_only_when_the_workload_marks_intermediates():
    from xtat.runner.process import program_digest

    one, other = Candidate(layout="data=2; batch:data"), Candidate(layout="data=2; d_ff:data")
    assert program_digest(one, False) is None and program_digest(other, False) is None  # the captured program
    assert program_digest(one, True) not in (None, program_digest(other, True))
    rewritten = Candidate(program={"knob:k": 1}, layout="data=2; batch:data")
    assert program_digest(rewritten, False) == program_digest(Candidate(program={"knob:k": 1}), False)


def test_program_stage_decisions_are_the_same_under_a_layouts_constraints():
    """A layout adds a sharding constraint per marked intermediate; the program stage's ids and rewrites
    must not move (the joint space is discovered without a layout and applied with one)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from xtat.capture.dimnames import MarkLayout, placed
    from xtat.stages.program import discover, rewrite
    from xtat.stages.program.rewriting import trace, walk_points

    def marked(params, x):  # the marked activation sits between a fusible producer and its consumers
        def loss(p):
            h = xtat.constrain(jnp.tanh(x @ p["w1"]), "batch", "d_ff")
            return jnp.sum(jnp.exp(h) * h) + jnp.sum(h @ p["w2"])

        return jax.value_and_grad(loss)(params)  # autodiff adds a reshard of the cotangent seed

    args = workload().args
    mesh = Mesh(np.array(jax.devices()[:1]), ("data",))  # one device is enough for the equations to exist
    laid_out = MarkLayout(lambda v, names: jax.lax.with_sharding_constraint(v, NamedSharding(mesh, PartitionSpec())))
    decisions = discover(marked, args)
    points = [p.id for p in walk_points(trace(marked, args, {}, {}).jaxpr.jaxpr)]
    with placed(laid_out):
        traced = trace(marked, args, {}, {})
        assert {"sharding_constraint", "reshard"} <= {e.primitive.name for e in traced.jaxpr.jaxpr.eqns}
        assert [p.id for p in walk_points(traced.jaxpr.jaxpr)] == points
        chosen = {d.id: d.values[-1] for d in decisions}  # every decision away from its default
        assert any(d.id.startswith("barrier@") for d in decisions)
        lowered = jax.jit(rewrite(marked, chosen)).lower(*args).as_text()
    # Every fenced edge got its barrier, those whose consumer reads the producer through the constraint too.
    barriers = sum(d.id.startswith("barrier@") for d in decisions)
    assert lowered.count("stablehlo.optimization_barrier") == barriers, lowered
    expected = jax.jit(marked)(*args)
    for ours, theirs in zip(jax.tree.leaves(jax.jit(rewrite(marked, chosen))(*args)), jax.tree.leaves(expected)):
        assert np.allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_declarations_must_fit_the_arrays():
    with pytest.raises(UserError, match="name 3 axes of an array of shape"):
        capture(xtat.Workload(lambda x: x * 2, (np.zeros((4, 4), np.float32),), dims=(xtat.dims("a", "b", "c"),)))
    with pytest.raises(UserError, match="one entry per argument"):
        capture(xtat.Workload(lambda x: x * 2, (np.zeros((4, 4), np.float32),), dims=xtat.dims("a", "b")))


def test_every_layout_of_a_two_layer_model_on_two_host_devices_computes_the_reference(tmp_path):
    db = tmp_path / "sharding.db"
    out = _two_devices(str(db), "declared")
    # The default and the 7 layouts, each verified against the single-device reference, and each its
    # own executable (a layout the worker ignored would be a duplicate of the default).
    assert out["trials"] == {"ok": 8}, out
    with Store.open(db) as store:
        (record,) = store.workloads()
        trials = store.trials(record.id)
    layouts = {json.loads(t.config_key).get("sharding", {}).get("layout", "") for t in trials}
    assert layouts == {"", *ON_TWO}
    assert len({t.exe_hash for t in trials}) == 8


def _two_devices(*arguments: str) -> dict:
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, str(TESTS / "sharded_two_layer.py"), *arguments], env=env,
                         capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_xtat_jit_places_the_inputs_by_the_adopted_layout(tmp_path):
    out = _two_devices(str(tmp_path / "deploy.db"), "deploy")
    assert out["found"] == ["adopted"]
    # batch:data splits the batch of the output over both devices, on the first call and the fast path's.
    assert out["devices"] == [2, 2] and out["shardings"] == [["data"]] * 2, out
    assert out["equal"]


def test_marked_intermediates_are_laid_out_by_every_layout_and_by_xtat_jit(tmp_path):
    out = _two_devices(str(tmp_path / "marked.db"), "marked")
    assert out["marks"] == [[["batch", "d_ff"], [BATCH, D_FF]]]
    # The program exported for a layout constrains the marked activation; the one without a layout does not.
    assert out["constraints"] == {"": 0, "data=2; d_ff:data": 1}, out
    assert out["trials"] == {"ok": 7}, out  # the default and the 6 layouts, each verified
    deployed = out["deploy"]
    assert deployed["found"] == ["adopted"] and deployed["equal"] and deployed["devices"] == [2, 2]
    assert deployed["constraints"] == 1, deployed  # xtat.jit traces the adopted layout's placement


# The production side of a layout preset: jax and the preset, nothing of xtat. two_layer is
# tests/support/sharded_two_layer.py's, copied.
PRESET_CHILD = r'''
import json, sys
import jax, jax.numpy as jnp, numpy as np

def two_layer(params, x):
    h = jnp.tanh(x @ params["w1"])
    y = h @ params["w2"]
    return jnp.mean(y**2), y

folder = sys.argv[1]
sys.path.insert(0, folder)
import layout_preset
data = np.load(folder + "/inputs.npz")
params, x = {"w1": data["w1"], "w2": data["w2"]}, data["x"]
out = [layout_preset.jit(two_layer, "two_layer")(params, x) for _ in range(2)]
reference = jax.jit(two_layer)(params, x)
assert not [m for m in sys.modules if m == "xtat" or m.startswith("xtat.")], "the preset imported xtat"
print(json.dumps({"specs": [list(o[1].sharding.spec) for o in out],
                  "devices": [len(o[1].sharding.device_set) for o in out],
                  "equal": all(bool(np.allclose(o[1], reference[1], rtol=1e-5, atol=1e-6)) for o in out)}))
'''


def test_a_python_preset_places_the_inputs_by_the_layout_without_xtat(tmp_path):
    from records import adopt

    w = workload()
    captured = capture(w)
    db = tmp_path / "preset.db"
    adopt(db, {"sharding": {"layout": "data=2; batch:data"}}, workload=w, name="two_layer",
          detail={"input_dims": [list(d) if d else None for d in captured.dims]})
    xtat_cli = [sys.executable, "-m", "xtat.cli.app", "export"]
    written = subprocess.run([*xtat_cli, str(tmp_path / "layout_preset.py"), "--preset", "python", "--db", str(db)],
                             capture_output=True, text=True, timeout=120)
    assert written.returncode == 0, written.stderr
    assert "laid out only by xtat.jit" in written.stdout + written.stderr
    refused = subprocess.run([*xtat_cli, "-", "--preset", "xla-flags", "--db", str(db)], capture_output=True,
                             text=True, timeout=120)
    assert refused.returncode != 0 and "no XLA flag expresses" in refused.stdout + refused.stderr
    params, x = w.args
    np.savez(tmp_path / "inputs.npz", w1=params["w1"], w2=params["w2"], x=x)
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    child = subprocess.run([sys.executable, "-c", PRESET_CHILD, str(tmp_path)], capture_output=True, text=True,
                           env=env, timeout=120)
    assert child.returncode == 0, child.stderr[-3000:]
    out = json.loads(child.stdout.strip().splitlines()[-1])
    # batch:data splits the output's batch over both devices, as xtat.jit's deploy does.
    assert out == {"specs": [["data"], ["data"]], "devices": [2, 2], "equal": True}, out
