"""xtat.jit: applies the adopted options, falls back with one warning otherwise."""

from __future__ import annotations

import functools
import json
import sqlite3
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xtat
from records import adopt
from tiny import mlp, tiny_mlp
from xtat.build.builder import executable_identity

OPTIONS = {"xla_cpu_prefer_vector_width": 128, "xla_backend_optimization_level": 1}
# With the pass off, mlp's program is another on any CPU (test_build.py), whatever the options do here.
ADOPTED = {"codegen": OPTIONS, "passes": {"tree_reduction_rewriter": True}}
COMPILED_AS = {**OPTIONS, "xla_disable_hlo_passes": "tree_reduction_rewriter"}


def _hash(compiled) -> str:
    return executable_identity(compiled)


def _record(db, adopted: bool = True) -> None:
    adopt(db, ADOPTED, adopted=adopted)


def test_jit_compiles_with_the_adopted_options(db):
    _record(db)
    args = tiny_mlp().args
    tuned = xtat.jit(mlp, db=db)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an adopted record must not warn
        out = tuned(*args)
    np.testing.assert_allclose(out[0], jax.jit(mlp)(*args)[0], rtol=1e-5)
    executable = tuned.lower(*args).compile()
    lowered = jax.jit(mlp).lower(*args)
    assert _hash(executable) == _hash(lowered.compile(compiler_options=COMPILED_AS))
    assert _hash(executable) != _hash(lowered.compile())
    assert tuned.lookups()[0].reason == "adopted"


def test_jit_without_database_uses_defaults_and_warns_once(tmp_path):
    args = tiny_mlp().args
    tuned = xtat.jit(mlp, db=tmp_path / "missing.db")
    with pytest.warns(UserWarning, match="no database") as caught:
        tuned(*args)
        tuned(*args)
    assert len([w for w in caught if "xtat.jit" in str(w.message)]) == 1
    assert _hash(tuned.lower(*args).compile()) == _hash(jax.jit(mlp).lower(*args).compile())
    assert not (tmp_path / "missing.db").exists()


def test_jit_with_stale_record_falls_back(db):
    _record(db)
    with sqlite3.connect(db) as con:  # as if tuned under another jaxlib
        con.execute("UPDATE workloads SET fingerprint='other', env='{\"jaxlib\": \"0.0.1\"}'")
    tuned = xtat.jit(mlp, db=db)
    with pytest.warns(UserWarning, match="stale"):
        tuned(*tiny_mlp().args)
    assert tuned.lookups()[0].options == {}
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM results").fetchone()[0] == 1  # never deleted


def test_the_environment_key_names_this_cpu():
    """On CPU the device kind is just "cpu": the key must say which CPU, so a store from another applies nowhere."""
    from xtat.capture.workload import environment_identity

    env = environment_identity()
    cpuinfo = open("/proc/cpuinfo").read()
    model = next(line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name"))
    assert env["cpu_model"] == model and "sse2" in env["cpu_isa"].split()
    assert {"platform_version", "xla_flags", "libtpu_init_args"} <= set(env)


def test_on_gpu_the_key_names_cuda_runtime_driver_and_cudnn():
    """No GPU here: a stand-in for jaxlib's cuda_versions module, as on a CUDA machine."""
    from types import SimpleNamespace

    from xtat.capture.workload import _cuda_identity

    versions = SimpleNamespace(cuda_runtime_get_version=lambda: 12080, cuda_driver_get_version=lambda: 12090,
                               cudnn_get_version=lambda: 91000)
    assert _cuda_identity(versions) == {"cuda_runtime": "12080", "cuda_driver": "12090", "cudnn": "91000"}
    assert _cuda_identity(None) == {"cuda_runtime": "unknown", "cuda_driver": "unknown", "cudnn": "unknown"}


def test_a_record_keyed_before_the_device_count_is_stale_kept_and_xtat_show_says_why(db):
    """A store written before the key held the device count: its records stay as they are, readable,
    and apply nowhere (their count is unknown); `xtat show` says so and why."""
    import subprocess
    import sys

    from xtat.capture.workload import DEVICES, fingerprint

    _record(db)
    with sqlite3.connect(db) as con:
        env, program = con.execute("SELECT env, program FROM workloads").fetchone()
        old = {k: v for k, v in json.loads(env).items() if k != DEVICES}
        con.execute("UPDATE workloads SET env=?, fingerprint=?", (json.dumps(old), fingerprint(program, old)))
        recorded = [con.execute(f"SELECT * FROM {table}").fetchall() for table in ("workloads", "trials", "results")]
    tuned = xtat.jit(mlp, db=db)
    with pytest.warns(UserWarning, match="devices: not recorded"):
        tuned(*tiny_mlp().args)
    assert tuned.lookups()[0].options == {}
    shown = subprocess.run([sys.executable, "-m", "xtat.cli.app", "show", "--db", str(db)], capture_output=True,
                           text=True, timeout=300)
    said = " ".join(shown.stdout.split())
    assert shown.returncode == 0 and "no: stale" in said, shown.stderr
    assert "tiny_mlp [" in said and "is stale here, never applied (kept as recorded): devices: not recorded" in said
    with sqlite3.connect(db) as con:
        assert [con.execute(f"SELECT * FROM {table}").fetchall()
                for table in ("workloads", "trials", "results")] == recorded


def test_record_keyed_before_the_machine_was_named_is_stale_never_applied_never_deleted(db):
    """A record from before the key named the CPU model, ISA and XLA flags: same program, older key."""
    from xtat.capture.workload import fingerprint

    _record(db)
    with sqlite3.connect(db) as con:
        (env,) = con.execute("SELECT env FROM workloads").fetchone()
        old = {k: v for k, v in json.loads(env).items() if k in ("platform", "device_kind", "jax", "jaxlib")}
        (program,) = con.execute("SELECT program FROM workloads").fetchone()
        con.execute("UPDATE workloads SET env=?, fingerprint=?", (json.dumps(old), fingerprint(program, old)))
    tuned = xtat.jit(mlp, db=db)
    with pytest.warns(UserWarning, match="stale"):
        tuned(*tiny_mlp().args)
    assert tuned.lookups()[0].options == {}
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM results").fetchone()[0] == 1


@pytest.mark.parametrize("config, settings, trial, reason", [
    ({"codegen": {"xla_option_from_the_future": True}}, None, True, "not one xtat searches"),
    ({"codegen": {"xla_dump_to": "DUMP"}}, None, True, "'xla_dump_to' is not one xtat searches"),
    ({"codegen": {"xla_backend_optimization_level": 1.5}}, None, True, "not a value xtat offers"),
    ({"passes": {"copy-insertion": True}}, None, True, "'copy-insertion'"),
    ({"codegen": {"xla_cpu_enable_fast_math": True}}, None, True, "relaxes numerics"),
    ({"runtime": {"cpus": 10_000}}, None, True, "exceeds"),
    ({"tiling": {"x": 1}}, None, True, "unknown stage 'tiling'"),
    ({"codegen": OPTIONS}, None, False, "no verified ok trial"),
])
def test_unvetted_record_is_never_applied(db, tmp_path, monkeypatch, config, settings, trial, reason):
    """A store may come from anywhere: only what a stage would offer here, measured here, is applied."""
    monkeypatch.chdir(tmp_path)
    config = json.loads(json.dumps(config).replace("DUMP", str(tmp_path / "dump")))
    adopt(db, config, settings=settings, trial=trial)
    tuned = xtat.jit(mlp, db=db)
    with pytest.warns(UserWarning, match="compiling with XLA defaults") as caught:
        out = tuned(*tiny_mlp().args)
    assert reason in str(caught[0].message)
    np.testing.assert_allclose(out[0], jax.jit(mlp)(*tiny_mlp().args)[0], rtol=1e-6)
    assert _hash(tuned.lower(*tiny_mlp().args).compile()) == _hash(jax.jit(mlp).lower(*tiny_mlp().args).compile())
    assert tuned.lookups()[0].found.value == "rejected"
    assert not (tmp_path / "dump").exists()
    with sqlite3.connect(db) as con:  # the row is marked, not deleted
        (detail,) = con.execute("SELECT detail FROM results").fetchone()
    assert reason in json.loads(detail)["rejected_at_apply"][0]["reason"]


def test_numerics_relaxing_record_applies_when_its_run_opted_in(db):
    adopt(db, {"codegen": {"xla_cpu_enable_fast_math": True}}, settings={"allow_numerics_change": True})
    tuned = xtat.jit(mlp, db=db)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tuned(*tiny_mlp().args)
    assert tuned.lookups()[0].found.value == "adopted"


def test_adopted_rewrite_that_no_longer_applies_falls_back(db):
    """Vetted, but the program changed under it: the rewrite fails at trace time, the defaults take over."""
    adopt(db, {"program": {"scan@0/0:len3:f32[2]": 3}})
    tuned = xtat.jit(mlp, db=db)
    with pytest.warns(UserWarning, match="not applicable here"):
        out = tuned(*tiny_mlp().args)
    np.testing.assert_allclose(out[0], jax.jit(mlp)(*tiny_mlp().args)[0], rtol=1e-6)
    assert tuned.lookups()[0].found.value == "rejected"
    with sqlite3.connect(db) as con:
        (detail,) = con.execute("SELECT detail FROM results").fetchone()
    assert "scan@0/0" in json.loads(detail)["rejected_at_apply"][0]["reason"]


def test_jit_with_corrupt_database_falls_back(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"SQLite format 3\x00" + b"\x07" * 4000)
    before = bad.read_bytes()
    tuned = xtat.jit(mlp, db=bad)
    with pytest.warns(UserWarning, match="unreadable"):
        tuned(*tiny_mlp().args)
    assert bad.read_bytes() == before


def test_jit_static_arguments_and_decorator_form(db):
    @xtat.jit(db=db, static_argnums=1)
    def scale(x, n):
        return x * n

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert float(scale(np.float32(2.0), 3)) == 6.0
        assert float(scale(np.float32(2.0), 4)) == 8.0


def renamed_mlp(w, x):
    """tiny.mlp under another name: the same program."""
    for _ in range(3):
        x = jnp.tanh(x @ w)
    return x.sum(), x


def _scaled_mlp(w, x, scale):
    return mlp(w, x * scale)


def _mlp_steps(w, x, steps=5):
    for _ in range(steps):
        x = jnp.tanh(x @ w)
    return x.sum(), x


@pytest.mark.parametrize("fn", [renamed_mlp, functools.partial(mlp), functools.partial(_mlp_steps, steps=3),
                                lambda w, x: mlp(w, x)], ids=["renamed", "partial", "partial-with-keyword", "lambda"])
def test_record_found_whatever_the_function_is_called(db, fn):
    _record(db)
    tuned = xtat.jit(fn, db=db)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tuned(*tiny_mlp().args)
    assert [lookup.found.value for lookup in tuned.lookups()] == ["adopted"]


@pytest.mark.parametrize("fn", [functools.partial(_scaled_mlp, scale=2.0), lambda w, x: mlp(w.T, x)],
                         ids=["other-constant", "transposed"])
def test_a_changed_program_misses_the_record(db, fn):
    _record(db)
    tuned = xtat.jit(fn, db=db)
    with pytest.warns(UserWarning, match="no record"):
        tuned(*tiny_mlp().args)
    assert [lookup.found.value for lookup in tuned.lookups()] == ["no record"]
