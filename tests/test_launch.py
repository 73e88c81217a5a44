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
    assert "starting the program unchanged" in result.stderr and "tuned under another device" in result.stderr


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
    assert "starting the program unchanged" in result.stderr and "exceeds" in result.stderr


def test_run_keeps_the_users_xla_flags_and_replaces_a_device_count():
    from xtat.candidate import ProcessSetup

    env = ProcessSetup(host_devices=4).environment(
        {"XLA_FLAGS": "--xla_cpu_use_thunk_runtime=true --xla_force_host_platform_device_count=8", "HOME": "h"})
    assert env["XLA_FLAGS"].split() == ["--xla_cpu_use_thunk_runtime=true", "--xla_force_host_platform_device_count=4"]
    assert env["HOME"] == "h"


def test_records_made_under_other_xla_flags_are_not_applied(db):
    _record(db, {"cpus": 1})
    env = {**os.environ, "XLA_FLAGS": "--xla_cpu_use_thunk_runtime=true"}
    result = subprocess.run([*XTAT_RUN, "--db", str(db), "--", sys.executable, "-c", READ_BACK],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0 and "tuned under another device or version" in result.stderr
