"""The sharding stage: layouts of named dimensions over a mesh, their enumeration, and a tiny two-layer
model tuned over every layout on forced host devices (real XLA, real SPMD partitioning)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import xtat
from sharded_two_layer import BATCH, D_FF, D_MODEL, D_OUT, workload
from xtat.candidate import Candidate
from xtat.errors import UserError
from xtat.stages.base import Context
from xtat.stages.registry import STAGE_ORDER
from xtat.stages.sharding import ShardingStage
from xtat.stages.sharding.layouts import Layout, enumerate_layouts, meshes, partition_spec
from xtat.store.sql import Store
from xtat.workload import capture

TESTS = Path(__file__).parent
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


def _context(devices: int, declared: bool = True) -> Context:
    captured = capture(workload(declared))
    return Context(lambda: None, (), {}, "cpu", False, None, lambda c: [], lambda c: "", devices,
                   tuple(zip(captured.dims, (tuple(x.shape) for x in captured.inputs), strict=True)),
                   captured.dims_declared)


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
