"""The standard suite families: every small workload compiles, runs finite and trains.

Each step is compiled once with real XLA; the train steps then run a few
optimizer steps on their fixed seed-0 batch.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import xtat
from tiny import FAST
from xtat.core.errors import UserError
from xtat.stages.program.points import SCAN, level_points
from xtat.suite import entries
from xtat.suite.common import choose
from xtat.suite.language import bert_task, gpt_task, lstm_task
from xtat.suite.structured import dlrm_task, gnn_task
from xtat.suite.vision import BottleneckBlock, mlp_mixer_task, mlp_task, resnet_task, unet_diffusion_task, vit_task

STANDARD = ("mlp", "resnet", "vit", "mlp-mixer", "unet-diffusion", "bert", "gpt", "lstm", "gnn", "dlrm")
TRAIN_STEPS = 4


def _leaves(tree) -> list[np.ndarray]:
    return [np.asarray(leaf) for leaf in jax.tree.leaves(tree)]


def _assert_finite(tree, what: str) -> None:
    for i, leaf in enumerate(_leaves(tree)):
        assert np.all(np.isfinite(leaf)), f"{what}: leaf {i} has NaN or Inf"


def _assert_same_structure(fresh: tuple, args: tuple) -> None:
    assert jax.tree.structure(fresh) == jax.tree.structure(args)
    assert [(a.shape, a.dtype) for a in _leaves(fresh)] == [(a.shape, a.dtype) for a in _leaves(args)]


def _assert_equal(a, b) -> None:
    for x, y in zip(_leaves(a), _leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)


def _compiled(workload: xtat.Workload):
    return jax.jit(workload.fn).lower(*workload.args).compile()


def test_every_standard_family_is_in_the_suite():
    suite = entries()
    assert set(STANDARD) <= set(suite)
    assert all(suite[name].family.startswith("standard ") for name in STANDARD)


# The train steps check the suite's benchmark models, not the tuner (5-20 s each on the 2-core machine):
# `pytest -m slow -k lowers_the_loss` trains every family; the default run checks every inference step
# and trains two (the MLP, and the LSTM's scan).
SLOW_TRAIN = set(STANDARD) - {"mlp", "lstm"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_TRAIN else n for n in STANDARD])
def test_train_step_is_finite_deterministic_and_lowers_the_loss(name):
    workload = entries()[name].workload("train", "small")
    assert workload.name == f"{name}/train"
    step = _compiled(workload)
    variables, opt_state, batch = workload.args

    first = step(*workload.args)
    _assert_finite(first, f"{name} train on seed 0")
    _assert_equal(first, step(*workload.args))
    # BatchNorm (resnet): train mode moves every running statistic.
    state = [collection for collection in variables if collection != "params"]
    assert set(first[0]) == set(variables)
    for collection in state:
        moved = zip(_leaves(first[0][collection]), _leaves(variables[collection]))
        assert all(not np.array_equal(a, b) for a, b in moved)
    assert state == (["batch_stats"] if name == "resnet" else [])

    fresh = workload.make_inputs(1)
    _assert_same_structure(fresh, workload.args)
    assert any(not np.array_equal(a, b) for a, b in zip(_leaves(fresh[2]), _leaves(batch))), "same batch for seed 1"
    _assert_finite(step(*fresh), f"{name} train on seed 1")
    _assert_equal(workload.make_inputs(0)[2], batch)

    losses = []
    for _ in range(TRAIN_STEPS):
        new_variables, opt_state, loss = step(variables, opt_state, batch)
        losses.append(float(loss))
        assert any(not np.array_equal(a, b) for a, b in
                   zip(_leaves(new_variables["params"]), _leaves(variables["params"])))
        variables = new_variables
    assert losses[-1] < losses[0], losses


@pytest.mark.parametrize("name", STANDARD)
def test_inference_step_is_finite_and_deterministic(name):
    workload = entries()[name].workload("inference", "small")
    assert workload.name == f"{name}/inference"
    step = _compiled(workload)
    out = step(*workload.args)
    _assert_finite(out, f"{name} inference on seed 0")
    _assert_equal(out, step(*workload.args))

    fresh = workload.make_inputs(1)
    _assert_same_structure(fresh, workload.args)
    fresh_out = step(*fresh)
    _assert_finite(fresh_out, f"{name} inference on seed 1")
    assert any(not np.array_equal(a, b) for a, b in zip(_leaves(fresh_out), _leaves(out)))


def test_lstm_time_loop_is_a_scan_the_program_stage_can_unroll():
    workload = entries()["lstm"].workload("inference", "small")
    jaxpr = jax.make_jaxpr(workload.fn)(*workload.args).jaxpr
    scans = [point for point in level_points(jaxpr, "") if point.kind == SCAN]
    assert [point.id.split(":")[1] for point in scans] == ["len32"]  # 32 time steps
    assert len(scans[0].values) > 1


TASKS = (mlp_task, resnet_task, vit_task, mlp_mixer_task, unet_diffusion_task, bert_task, gpt_task, lstm_task,
         gnn_task, dlrm_task)


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.__name__)
def test_large_size_is_a_different_model(task):
    # Defined, never built here: the large sizes are meant for an accelerator.
    assert task("large").model != task("small").model


def test_large_resnet_is_resnet50_at_224():
    task = resnet_task("large")
    assert task.model.stage_sizes == (3, 4, 6, 3) and task.model.block is BottleneckBlock
    assert task.make_batch.keywords["shape"] == (224, 224, 3)


def test_unknown_size_is_a_user_error():
    with pytest.raises(UserError, match="'medium'"):
        choose("medium", small=1, large=2)


def test_a_standard_inference_step_tunes_end_to_end(db):
    workload = entries()["mlp"].workload("inference", "small")
    result = xtat.tune(workload, db=db, budget=3, options=("xla_cpu_opt_preset", "xla_backend_optimization_level"),
                       stages=("codegen",), **FAST)
    assert result.workload == "mlp/inference"
    assert result.new_trials == 3 and sum(result.trials.values()) == 3
    assert result.trials.get("ok", 0) >= 1
    assert result.default_ci_ms[0] <= result.default_ms <= result.default_ci_ms[1]
