"""Presets: `xtat export --preset` output used by a process that imports only jax."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

import xtat
from records import adopt
from tiny import mlp, tiny_mlp
from xtat.build.builder import executable_identity, identity_of

XTAT = [sys.executable, "-m", "xtat.cli.app"]
# The codegen options ride along; the pass is what makes the executable differ from the default's
# on any CPU (tiny.py's mlp sums 2048 elements, which the rewriter splits: test_build.py checks it).
CONFIG = {"codegen": {"xla_cpu_prefer_vector_width": 128, "xla_cpu_opt_preset": "CPU_OPT_PRESET_FAST_RUNTIME"},
          "passes": {"tree_reduction_rewriter": True}}

# The production side: jax and the preset, nothing of xtat. mlp is tests/support/tiny.py's, copied.
CHILD = r'''
import json, sys
import jax, jax.numpy as jnp, numpy as np

def mlp(w, x):
    for _ in range(3):
        x = jnp.tanh(x @ w)
    return x.sum(), x

fmt, preset, inputs, out = sys.argv[1:5]
if fmt == "python":
    sys.path.insert(0, preset.rsplit("/", 1)[0])
    import tuned_preset
    jitted = tuned_preset.jit(mlp, "tiny_mlp")
elif fmt == "json":
    with open(preset) as f:
        jitted = jax.jit(mlp, compiler_options=json.load(f)["compiler_options"]["tiny_mlp"])
else:  # xla-flags: the parent put the preset in XLA_FLAGS
    jitted = jax.jit(mlp)
data = np.load(inputs)
compiled = jitted.lower(data["w"], data["x"]).compile()
assert not [m for m in sys.modules if m == "xtat" or m.startswith("xtat.")], "the preset imported xtat"
with open(out + ".txt", "w") as f:
    f.write(compiled.as_text())
with open(out + ".bin", "wb") as f:
    f.write(compiled.runtime_executable().serialize())
'''


def _record(db, config: dict, name: str = "tiny_mlp") -> None:
    adopt(db, config, name=name)


def _export(db, *args) -> subprocess.CompletedProcess:
    return subprocess.run([*XTAT, "export", *map(str, args), "--db", str(db)], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("fmt", ["python", "json", "xla-flags"])
def test_preset_compiles_what_xtat_jit_compiles_in_a_process_without_xtat(db, tmp_path, fmt):
    _record(db, CONFIG)
    preset = tmp_path / {"python": "tuned_preset.py", "json": "preset.json", "xla-flags": "preset.flags"}[fmt]
    result = _export(db, preset, "--preset", fmt)
    assert result.returncode == 0, result.stderr
    w, x = tiny_mlp().args
    np.savez(tmp_path / "inputs.npz", w=w, x=x)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if fmt == "xla-flags":
        env["XLA_FLAGS"] = preset.read_text().strip()
    child = subprocess.run([sys.executable, "-c", CHILD, fmt, str(preset), str(tmp_path / "inputs.npz"),
                            str(tmp_path / "child")], capture_output=True, text=True, env=env, timeout=300)
    assert child.returncode == 0, child.stderr[-3000:]
    theirs = identity_of((tmp_path / "child.txt").read_text(), (tmp_path / "child.bin").read_bytes())
    ours = executable_identity(xtat.jit(mlp, db=db).lower(w, x).compile())
    assert theirs == ours
    assert ours != executable_identity(jax.jit(mlp).lower(w, x).compile())  # the config changes the executable


def test_python_preset_holds_options_rewrites_and_environment(db, tmp_path):
    _record(db, {**CONFIG, "program": {"knob:block": 8}, "runtime": {"cpus": 1, "host_devices": 2}})
    result = _export(db, "-", "--preset", "python")
    assert result.returncode == 0, result.stderr
    namespace: dict = {}
    exec(compile(result.stdout, "preset", "exec"), namespace)
    assert namespace["COMPILER_OPTIONS"] == {"tiny_mlp": {"xla_cpu_prefer_vector_width": 128,
                                                          "xla_cpu_opt_preset": "CPU_OPT_PRESET_FAST_RUNTIME",
                                                          "xla_disable_hlo_passes": "tree_reduction_rewriter"}}
    assert namespace["PROGRAM_REWRITES"] == {"tiny_mlp": {"knob:block": 8}}
    assert namespace["ENVIRONMENT"] == {"tiny_mlp": {"cpu_count": 1, "host_device_count": 2}}
    assert "need xtat.jit" in result.stderr


def test_xla_flags_preset_is_refused_when_workloads_differ(db):
    _record(db, CONFIG)
    adopt(db, {"codegen": {"xla_cpu_prefer_vector_width": 256}}, name="other",
          workload=xtat.Workload(lambda w, x: mlp(w, x * 2), tiny_mlp().args))
    before = db.read_bytes()
    result = _export(db, "-", "--preset", "xla-flags")
    assert result.returncode == 2 and "whole process" in result.stderr and "--workload" in result.stderr
    assert db.read_bytes() == before
    alone = _export(db, "-", "--preset", "xla-flags", "--workload", "other")
    assert alone.returncode == 0 and alone.stdout.strip() == "--xla_cpu_prefer_vector_width=256"


@pytest.mark.parametrize("args, message", [
    (["--preset", "yaml"], "not one of python, json, xla-flags"),
    (["--workload", "tiny_mlp"], "--workload selects what a --preset holds"),
])
def test_bad_preset_arguments_are_clear_errors(db, args, message):
    _record(db, CONFIG)
    result = _export(db, "-", *args)
    assert result.returncode == 2 and message in result.stderr


def test_preset_with_nothing_adopted_says_so(db):
    adopt(db, {}, adopted=False)
    result = _export(db, "-", "--preset", "json")
    assert result.returncode == 2 and "no adopted config" in result.stderr


def test_preset_json_is_one_document(db):
    _record(db, CONFIG)
    document = json.loads(_export(db, "-", "--preset", "json").stdout)
    assert document["xtat_preset"] == 1
    assert document["tuned_under"]["tiny_mlp"]["jaxlib"]


def test_preset_of_an_unvetted_record_is_refused_and_nothing_written(db, tmp_path):
    adopt(db, {"codegen": {"xla_dump_to": str(tmp_path / "dump")}})
    result = _export(db, tmp_path / "preset.py", "--preset", "python")
    assert result.returncode == 2 and "refused" in result.stderr and "xla_dump_to" in result.stderr
    assert not (tmp_path / "preset.py").exists() and not (tmp_path / "dump").exists()
