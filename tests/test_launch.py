"""`xtat run`: the adopted CPU count and host device count, read back inside the child."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from records import adopt
from tiny import tiny_mlp

XTAT_RUN = [sys.executable, "-m", "xtat.cli.app", "run"]
READ_BACK = ("import os, jax; "
             "print(len(os.sched_getaffinity(0)), jax.local_device_count(), os.environ.get('XLA_FLAGS', '-'))")


def _record(db, runtime: dict, name: str = "tiny_mlp", env: dict | None = None, workload=None) -> None:
    adopt(db, {"runtime": runtime}, name=name, env=env, workload=workload)


def _run(db, *command, workload=None):
    extra = ["--workload", workload] if workload else []
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # as when the records were made
    return subprocess.run([*XTAT_RUN, "--db", str(db), *extra, "--", *command], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to tell one from all")
def test_run_applies_the_tuned_cpu_count_and_host_device_count(db):
    _record(db, {"cpus": 1, "host_devices": 2})
    result = _run(db, sys.executable, "-c", READ_BACK)
    assert result.returncode == 0, result.stderr
    cpus, devices, flags = result.stdout.split(maxsplit=2)
    assert (cpus, devices) == ("1", "2")
    assert flags.split() == ["--xla_force_host_platform_device_count=2"]
    assert "CPU affinity" in result.stderr and "1 CPU(s)" in result.stderr and "tiny_mlp" in result.stderr


def test_run_passes_the_exit_status_through_and_ignores_other_environments(db):
    _record(db, {"cpus": 1}, env={"platform": "cpu", "device_kind": "other", "jax": "0", "jaxlib": "0"})
    result = _run(db, sys.executable, "-c", "import sys; sys.exit(7)")
    assert result.returncode == 7
    said = " ".join(result.stderr.split())  # as one line, however the console wrapped it
    assert "keeps its CPUs and devices" in said and "device_kind: tuned with 'other', here 'cpu'" in said


def test_run_refuses_workloads_tuned_for_different_environments(db):
    import xtat
    from tiny import mlp

    _record(db, {"cpus": 1})
    _record(db, {"host_devices": 2}, name="other", workload=xtat.Workload(lambda w, x: mlp(w, x * 2), tiny_mlp().args))
    result = _run(db, sys.executable, "-c", "print('ran')")
    assert result.returncode == 2 and "--workload" in result.stderr and "ran" not in result.stdout
    chosen = _run(db, sys.executable, "-c", READ_BACK, workload="other")
    assert chosen.returncode == 0, chosen.stderr
    assert chosen.stdout.split()[1] == "2"


def test_run_of_a_missing_program_is_a_clear_error(db):
    _record(db, {"cpus": 1})
    result = _run(db, "no-such-program-xtat")
    assert result.returncode == 2 and "cannot start 'no-such-program-xtat'" in result.stderr


def test_run_applies_nothing_from_an_unvetted_record(db):
    _record(db, {"cpus": 10_000})
    result = _run(db, sys.executable, "-c", READ_BACK)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == str(len(os.sched_getaffinity(0)))
    assert "keeps its CPUs and devices" in result.stderr and "exceeds" in result.stderr


def test_run_keeps_the_users_xla_flags_and_replaces_a_device_count():
    from xtat.core.candidate import ProcessSetup

    env = ProcessSetup(host_devices=4).environment(
        {"XLA_FLAGS": "--xla_cpu_use_thunk_runtime=true --xla_force_host_platform_device_count=8", "HOME": "h"})
    assert env["XLA_FLAGS"].split() == ["--xla_cpu_use_thunk_runtime=true", "--xla_force_host_platform_device_count=4"]
    assert env["HOME"] == "h"


def test_records_made_under_other_xla_flags_are_not_applied(db):
    _record(db, {"cpus": 1})
    env = {**os.environ, "XLA_FLAGS": "--xla_cpu_use_thunk_runtime=true"}
    result = subprocess.run([*XTAT_RUN, "--db", str(db), "--", sys.executable, "-c", READ_BACK],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0 and "stale here: xla_flags: tuned with ''" in result.stderr


# ---------------------------------------------------------------- compile options, with no edit

TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "support")
# The user's script: tiny_mlp's function under plain jax.jit, called, then its optimised HLO (the
# AOT path reaches the same compile step); and a program nobody tuned.
SCRIPT = ("import hashlib, sys; sys.path.insert(0, {tests!r}); import jax; from tiny import mlp, _mlp_inputs; "
          "w, x = _mlp_inputs(0); jax.block_until_ready(jax.jit(mlp)(w, x)); "
          "jax.block_until_ready(jax.jit(lambda a: a * 2)(x)); "
          "print(hashlib.sha256(jax.jit(mlp).lower(w, x).compile().as_text().encode()).hexdigest()); "
          "print('sqlalchemy' in sys.modules)")
# Fusion emitters off: another optimised HLO for tiny_mlp on any CPU (the fusions' kinds, not the ISA).
FUSION_EMITTERS_OFF = {"codegen": {"xla_cpu_use_fusion_emitters": False}}


def test_every_program_a_script_compiles_gets_its_adopted_compile_options(db):
    adopt(db, FUSION_EMITTERS_OFF)
    script = [sys.executable, "-c", SCRIPT.format(tests=TESTS)]
    plain = subprocess.run(script, capture_output=True, text=True, timeout=300)
    tuned = _run(db, *script)
    assert plain.returncode == 0 and tuned.returncode == 0, plain.stderr + tuned.stderr
    assert plain.stdout != tuned.stdout  # the same jax.jit, another executable
    applied = [line for line in tuned.stderr.splitlines() if "adopted compile options applied" in line]
    assert len(applied) == 1 and "xla_cpu_use_fusion_emitters" in applied[0], tuned.stderr  # tiny_mlp's, once
    assert tuned.stdout.split()[-1] == "False"  # an SQLite store is read without importing SQLAlchemy

    elsewhere = db.parent / "elsewhere.db"
    adopt(elsewhere, FUSION_EMITTERS_OFF, env={"platform": "cpu", "device_kind": "other", "jax": "0",
                                                        "jaxlib": "0"})
    other = _run(elsewhere, *script)
    assert other.returncode == 0 and other.stdout == plain.stdout, other.stderr  # another environment's record
    assert "adopted compile options applied" not in other.stderr and "not applied (stale" in other.stderr


def test_a_record_holds_for_the_device_count_it_was_tuned_with(db):
    """The key holds the device count the process had before xtat's runtime setup: `xtat run`'s
    program, given 2 host devices by the adopted setup, finds its record; a process started with
    another count of its own does not, and says why."""
    from xtat.capture.workload import DEVICES, capture

    adopt(db, {**FUSION_EMITTERS_OFF, "runtime": {"host_devices": 2}})
    tuned_with = capture(tiny_mlp()).identity.env[DEVICES]
    script = [sys.executable, "-c", SCRIPT.format(tests=TESTS)]
    tuned = _run(db, *script)
    assert tuned.returncode == 0, tuned.stderr
    assert "XLA_FLAGS --xla_force_host_platform_device_count=2" in " ".join(tuned.stderr.split())
    assert "adopted compile options applied" in tuned.stderr, tuned.stderr

    other = str(int(tuned_with) + 2)
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={other}"}
    elsewhere = subprocess.run([*XTAT_RUN, "--db", str(db), "--", *script], capture_output=True, text=True, env=env,
                               timeout=300)
    said = " ".join(elsewhere.stderr.split())
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert f"stale here: devices: tuned with '{tuned_with}', here '{other}'" in said
    assert f"not applied (stale: devices: tuned with '{tuned_with}', here '{other}')" in said
    assert "adopted compile options applied" not in said


def test_a_config_that_rewrites_the_program_is_not_applied_in_part(db):
    adopt(db, {**FUSION_EMITTERS_OFF, "program": {"knob:chunks": 2}})
    script = [sys.executable, "-c", SCRIPT.format(tests=TESTS)]
    plain = subprocess.run(script, capture_output=True, text=True, timeout=300)
    tuned = _run(db, *script)
    assert tuned.returncode == 0 and tuned.stdout == plain.stdout, tuned.stderr
    assert "only xtat.jit can apply" in tuned.stderr


def test_run_with_no_store_runs_the_program_as_it_is(tmp_path):
    result = _run(tmp_path / "none" / "xtat.db", sys.executable, "-c",
                  "import jax, jax.numpy as jnp; print(jax.jit(lambda x: x + 1)(jnp.int32(1)))")
    assert result.returncode == 0 and result.stdout.strip() == "2", result.stderr
    assert "nothing is tuned yet" in result.stderr


def test_a_sitecustomize_of_the_users_still_runs_and_jax_loads_after_the_scripts_own_settings(db, tmp_path):
    adopt(db, FUSION_EMITTERS_OFF)
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "sitecustomize.py").write_text("import os\nos.environ['THEIRS'] = 'ran'\n")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["PYTHONPATH"] = str(tmp_path / "theirs")
    # The script sets a jax setting through the environment before its own import of jax: it must hold.
    script = ("import os, sys; print(os.environ.get('THEIRS'), 'jax' in sys.modules); "
              "os.environ['JAX_ENABLE_X64'] = '1'; import jax, jax.numpy as jnp; print(jnp.zeros(1).dtype)")
    result = subprocess.run([*XTAT_RUN, "--db", str(db), "--", sys.executable, "-c", script], capture_output=True,
                            text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ran", "False", "float64"]


@pytest.mark.parametrize("case", ["plain", "static", "donated", "kwargs", "constant", "weak", "unused"])
def test_a_program_is_fingerprinted_at_its_compile_as_xtat_tune_keys_it(case):
    import jax
    import jax.numpy as jnp
    import numpy as np

    from xtat.apply.intercept import identity_of
    from xtat.capture.workload import Identity

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    # A captured array: jax 0.10.2 embeds it in the program; a jax that hoists it into an input
    # (`const_args`) must see it left out of the key, which this jax cannot show.
    table = np.linspace(0, 1, 4096, dtype=np.float32)
    jitted, args, kwargs = {
        "plain": (jax.jit(lambda a, b: (a @ b.T, a.sum())), (x, x), {}),
        "static": (jax.jit(lambda a, n: a * n, static_argnums=1), (x, 3), {}),
        "donated": (jax.jit(lambda a, b: a + b, donate_argnums=0), (jnp.asarray(x), x), {}),
        "kwargs": (jax.jit(lambda a, *, scale: {"y": a * scale}), (x,), {"scale": x[0]}),
        "constant": (jax.jit(lambda a: a.sum() + table[:12].reshape(3, 4) * a), (x,), {}),
        "weak": (jax.jit(lambda a, s: a * s), (x, 2.0), {}),
        "unused": (jax.jit(lambda a, b: a * 2), (x, x), {}),
    }[case]
    lowered = jitted.lower(*args, **kwargs)
    assert identity_of(lowered._lowering) == Identity.of(lowered)
