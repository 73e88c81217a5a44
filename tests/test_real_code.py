"""Users' code as they write it: typed PRNG keys, static arguments, functions already wrapped by
jax.jit, Python scalars and non-array leaves, and target names that identify."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xtat
from records import adopt
from tiny import CHUNKED, FAST, chunked_matmul
from xtat.apply.lookup import Found
from xtat.capture.targets import load_target
from xtat.capture.workload import capture
from xtat.compare.runs import load_workloads
from xtat.core.errors import UserError

OPTIONS = {"xla_cpu_prefer_vector_width": 128, "xla_backend_optimization_level": 1}
FOUND = {Found.ADOPTED, Found.NOT_ADOPTED}  # the store had a record of this very program


def noisy_steps(key, x, n):
    """A typed key in and out, and a static step count that Python loops over."""
    for _ in range(n):
        key, sub = jax.random.split(key)
        x = jnp.tanh(chunked_matmul(x, x.T) * 0.05 + jax.random.normal(sub, x.shape))
    return key, x.sum()


def _inputs():
    return jax.random.key(0), np.random.default_rng(0).standard_normal((16, 16), dtype=np.float32)


def test_typed_keys_and_static_arguments_tune_and_deploy(db):
    key, x = _inputs()
    workload = xtat.Workload(noisy_steps, (key, x), {"n": 3}, static_argnames="n")
    # The default, chunks(2), chunks(4): three builds of their own (tiny.py).
    result = xtat.tune(workload, db=db, budget=3, **CHUNKED)
    # Every config ran in a worker, its typed key sent as key data and its output key verified.
    assert result.trials == {"ok": 3}, result.trials
    tuned = xtat.jit(noisy_steps, db=db, static_argnames="n")
    out_key, total = tuned(key, x, n=3)
    ref_key, ref_total = jax.jit(noisy_steps, static_argnames="n")(key, x, n=3)
    assert jax.dtypes.issubdtype(out_key.dtype, jax.dtypes.prng_key)
    np.testing.assert_array_equal(jax.random.key_data(out_key), jax.random.key_data(ref_key))
    np.testing.assert_allclose(total, ref_total, rtol=1e-5)
    assert tuned.lookups()[0].found in FOUND


@pytest.mark.parametrize("impl", ["threefry2x32", "rbg"])
def test_any_key_implementation_travels_as_its_data(impl):
    key = jax.random.key(1, impl=impl)
    captured = capture(xtat.Workload(noisy_steps, (key, _inputs()[1], 2), static_argnums=2))
    assert captured.inputs[0].dtype == np.uint32
    assert captured.inputs[0].shape == jax.random.key_data(key).shape
    assert captured.identity.avals[0]["dtype"].startswith("key<")


def test_a_jitted_function_is_unwrapped_with_its_static_arguments(db):
    key, x = _inputs()
    jitted = jax.jit(noisy_steps, static_argnames="n")
    workload = xtat.Workload(jitted, (key, x), {"n": 2})
    assert workload.fn is noisy_steps and workload.static_argnames == ("n",)
    adopt(db, {"codegen": OPTIONS}, workload=workload)
    # Found by xtat.jit whether it is given the jitted function or the plain one with the same option.
    for tuned in (xtat.jit(jitted, db=db), xtat.jit(noisy_steps, db=db, static_argnames=("n",))):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an adopted record must not warn
            tuned(key, x, n=2)
        assert tuned.lookups()[0].found is Found.ADOPTED
    # Another static value is another program.
    other = xtat.jit(jitted, db=db)
    with pytest.warns(UserWarning, match="no record"):
        other(key, x, n=3)


def _scaled(x, scale):
    return jnp.tanh(x * scale).sum()


def test_python_scalars_are_traced_as_jax_jit_traces_them(db):
    x = _inputs()[1]
    workload = xtat.Workload(_scaled, (x, 0.5))
    captured = capture(workload)
    assert captured.identity.avals[1] == {"shape": [], "dtype": "float32", "weak_type": True, "donated": False}
    adopt(db, {"codegen": OPTIONS}, workload=workload)
    tuned = xtat.jit(_scaled, db=db)
    assert float(tuned(x, 0.5)) == pytest.approx(float(jax.jit(_scaled)(x, 0.5)), rel=1e-6)
    assert tuned.lookups()[0].found is Found.ADOPTED


def _halve(x, scale):
    return x * scale


def test_a_python_scalar_leaves_a_low_precision_program_low_precision():
    # A Python float is weakly typed under jax.jit: bfloat16 times 0.5 stays bfloat16. Sent to the
    # workers as a strongly typed float32 it would promote the program the tuner measures to float32.
    x = jnp.ones((4, 4), jnp.bfloat16)
    exported = jax.export.deserialize(bytearray(capture(xtat.Workload(_halve, (x, 0.5))).exported))
    assert [a.dtype for a in exported.out_avals] == [jax.eval_shape(_halve, x, 0.5).dtype] == [jnp.bfloat16]


def _with_mode(x, config):
    return x * 2 if config["mode"] == "double" else x


def test_a_non_array_leaf_is_refused_with_its_path():
    x = _inputs()[1]
    with pytest.raises(UserError, match=r"args\[1\]\['mode'\] is a str.*static_argnums=/static_argnames="):
        capture(xtat.Workload(_with_mode, (x, {"mode": "double"})))


def test_static_dictionaries_are_not_hashable_so_jax_refuses_them_in_its_words():
    with pytest.raises(UserError, match="fails to trace under jax.jit"):
        capture(xtat.Workload(_with_mode, (_inputs()[1], {"mode": "double"}), static_argnums=1))


def test_make_inputs_must_keep_the_static_arguments():
    key, x = _inputs()
    workload = xtat.Workload(noisy_steps, (key, x, 2), static_argnums=2, make_inputs=lambda seed: (key, x, 3))
    with pytest.raises(UserError, match="same static arguments"):
        capture(workload)


def _write_target(folder: Path, stem: str, scale: float) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.py"
    path.write_text("import jax.numpy as jnp\nimport numpy as np\n\n\n"
                    f"def make():\n    return (lambda x: jnp.tanh(x * {scale}), (np.ones((8, 8), np.float32),))\n")
    return f"{path}:make"


def test_targets_are_named_by_where_they_come_from(tmp_path):
    a, b = _write_target(tmp_path, "langevin", 1.0), _write_target(tmp_path, "ising", 2.0)
    assert load_target(a).display_name == "langevin:make"
    assert load_target("xtat.suite.moe:moe_train_step").display_name == "moe-glam/train"  # its own name
    assert load_target(a, name="mine").display_name == "mine"
    assert [w.display_name for w in load_workloads((a, b))] == ["langevin:make", "ising:make"]
    # Same stem in two folders: each is named by its whole target.
    c = _write_target(tmp_path / "other", "langevin", 3.0)
    assert [w.display_name for w in load_workloads((a, c))] == [a, c]
    with pytest.raises(UserError, match="given twice"):
        load_workloads((a, a))


CALLBACK_TARGET = '''
import os

import jax
import jax.numpy as jnp
import numpy as np

import xtat

LOG = {log!r}


def _note():
    with open(LOG, "a") as log:
        log.write(f"{{os.getpid()}}\\n")


def _imports():
    with open(LOG + ".imports", "a+") as counter:
        counter.seek(0)
        count = len(counter.read())
        counter.write("x")
    return count


def step(x, n):
    jax.debug.callback(_note)
    jax.debug.print("step: {{s}}", s=x.sum())
    for _ in range(n):
        x = jnp.tanh(x @ x.T * 0.1)
    return x


def make():
    # Each import must trace the same program: {shapes}
    rows = {rows}
    return xtat.Workload(step, (np.ones((rows, 8), np.float32), 2), static_argnums=1)
'''


def _callback_target(tmp_path: Path, changing: bool = False) -> tuple[str, Path]:
    log = tmp_path / "calls.log"
    rows = "8 + _imports()" if changing else "8"
    path = tmp_path / "with_callbacks.py"
    path.write_text(CALLBACK_TARGET.format(log=str(log), rows=rows,
                                           shapes="this one does not" if changing else "this one does"))
    return f"{path}:make", log


def test_a_program_with_host_callbacks_is_traced_and_run_in_the_workers(db, tmp_path):
    target, log = _callback_target(tmp_path)
    workload = load_target(target)
    # The program stage leaves out a program with callbacks; the passes stage offers only passes that
    # changed this program on this machine, so its configs build executables of their own (not
    # codegen options, which may rebuild the default's on some CPUs: issue 29).
    result = xtat.tune(workload, db=db, budget=3, stages=("passes",), **FAST)
    assert set(result.trials) <= {"ok", "duplicate"} and result.trials["ok"] >= 2, result.trials
    callers = {int(pid) for pid in log.read_text().split()}
    assert callers - {os.getpid()}, "the callbacks never ran in a worker"
    tuned = xtat.jit(workload.fn, db=db, static_argnums=1)
    np.testing.assert_allclose(tuned(*workload.args), jax.jit(workload.fn, static_argnums=1)(*workload.args),
                               rtol=1e-6)
    assert tuned.lookups()[0].found in FOUND


def test_a_worker_that_traces_another_program_is_refused(db, tmp_path):
    target, _ = _callback_target(tmp_path, changing=True)
    with pytest.raises(UserError, match="traced another program than the tuner did"):
        xtat.tune(load_target(target), db=db, budget=2, stages=("codegen",), **FAST)


def _printing(x):
    jax.debug.print("x: {x}", x=x.sum())
    return x * 2


def test_a_callback_program_without_a_source_says_how_to_make_it_importable():
    with pytest.raises(UserError, match="not a notebook cell.*source="):
        capture(xtat.Workload(_printing, (np.ones(4, np.float32),)))


def test_an_adopted_runtime_decision_says_how_to_deploy_it():
    from xtat.stages.base import concretize
    from xtat.stages.registry import make_stages
    from xtat.tuning.adoption import deployment_note

    def note(config: dict) -> str:
        return deployment_note(concretize(make_stages(), config))

    assert "`xtat run -- python" in note({"runtime": {"cpus": 1}, "codegen": OPTIONS})
    assert "(1 CPU(s))" in note({"runtime": {"cpus": 1}})
    assert note({"codegen": OPTIONS}) == ""
