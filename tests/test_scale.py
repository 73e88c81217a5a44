"""Scale-out: tuners sharing one PostgreSQL study, and a tuning run on a two-node Ray cluster.

Real parts only: the PostgreSQL server ./scripts/test starts (`postgres_database`), `xtat tune`
processes, and a Ray cluster of two nodes on this machine (`ray_cluster`). Each tuner and worker
writes when each of its timings starts and ends (the TEST-ONLY hook XTAT_TEST_TIMING_LOG).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import xtat
from tiny import FAST, tiny_mlp, tiny_target
from xtat.core.errors import UserError
from xtat.core.space import config_id
from xtat.core.status import FINAL_STATUSES, TrialStatus
from xtat.store.sql import Store

XTAT = [str(Path(sys.executable).with_name("xtat"))]


def _timings(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _intervals(events: list[dict]) -> list[tuple[float, float, int, str]]:
    """(start, end, pid, id) of each finished timing."""
    started: dict[tuple[int, str], float] = {}
    spans = []
    for e in events:
        if e["event"] == "start":
            started[(e["pid"], e["id"])] = e["at"]
        elif e["event"] == "end" and (e["pid"], e["id"]) in started:
            spans.append((started.pop((e["pid"], e["id"])), e["at"], e["pid"], e["id"]))
    return sorted(spans)


def assert_never_two_timings_at_once(events: list[dict]) -> None:
    spans = _intervals(events)
    for (_, end, pid, id), (start, _, other_pid, other) in zip(spans, spans[1:], strict=False):
        assert end <= start, f"{id} (pid {pid}) and {other} (pid {other_pid}) were timed at the same time"


def assert_study_whole(url: str) -> list:
    """Every trial final, one row per config, failures with their error text; the trials."""
    with Store.open(url, read_only=True) as store:
        (workload,) = store.workloads()
        trials = store.trials(workload.id)
    assert len({t.config_key for t in trials}) == len(trials)
    for t in trials:
        assert t.status in FINAL_STATUSES, (t.config, t.status)
        assert t.status in (TrialStatus.OK, TrialStatus.DUPLICATE) or t.error, (t.config, t.status)
    return trials


def _tuner(url: str, log: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "XTAT_TEST_TIMING_LOG": str(log)}
    # The sweep of tiny.py's chunks knob: configs with executables of their own on any CPU, so that
    # configs other than the default are timed (issue 29).
    command = [*XTAT, "tune", tiny_target("tiny_chunked_mlp"), "--db", url, "--stages", "program",
               "--budget", "6", "--confirm-time", "5", "--adopt-under-load", "--json", *extra]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_two_tuners_on_one_postgres_study_measure_every_config_once_and_decide_once(postgres_database, tmp_path):
    url, log = postgres_database(), tmp_path / "timings.jsonl"
    tuners = [_tuner(url, log), _tuner(url, log)]
    outputs = []
    for tuner in tuners:
        stdout, stderr = tuner.communicate(timeout=600)
        assert tuner.returncode == 0, stderr[-3000:]
        outputs.append(json.loads(stdout.strip().splitlines()[-1]))
    events = _timings(log)
    measured = Counter(e["id"] for e in events if e["event"] == "start")
    assert measured and set(measured.values()) == {1}, measured  # each config timed once between them
    assert {e["pid"] for e in events} <= {t.pid for t in tuners}  # (which of them timed what is a race)
    assert_never_two_timings_at_once(events)
    trials = assert_study_whole(url)
    assert len(trials) >= 6
    with Store.open(url, read_only=True) as store:
        (workload,) = store.workloads()
        results = store.results(workload.id)
        assert len(results) == 1, [(r.run_id, r.created_at, r.detail.basis) for r in results]  # one decision
    first, second = outputs
    assert (first["adopted"], first["best_config"]) == (second["adopted"], second["best_config"])
    assert sum("(recorded)" in o["message"] for o in outputs) == 1
    listed = subprocess.run([*XTAT, "trials", first["workload"], "--db", url, "--json"], capture_output=True,
                            text=True)
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == len(trials) and "xtat:xtat@" not in listed.stdout + listed.stderr


def test_an_empty_or_unreachable_study_is_a_clear_error(postgres_database):
    url = postgres_database()
    empty = subprocess.run([*XTAT, "show", "--db", url], capture_output=True, text=True)
    assert empty.returncode == 2 and "no xtat records in postgresql://xtat:***@" in empty.stderr, empty.stderr
    wrong = subprocess.run([*XTAT, "show", "--db", url.replace("xtat:xtat@", "xtat:wrong@")], capture_output=True,
                           text=True)
    assert wrong.returncode == 2 and "password authentication failed" in wrong.stderr and "wrong" not in wrong.stderr


def test_a_tuner_killed_mid_measurement_loses_nothing_and_its_config_is_measured_by_the_other(
        postgres_database, tmp_path):
    url, log = postgres_database(), tmp_path / "timings.jsonl"
    tuners = {tuner.pid: tuner for tuner in (_tuner(url, log), _tuner(url, log))}
    deadline = time.time() + 300
    victim = in_flight = None
    while victim is None and time.time() < deadline and all(t.poll() is None for t in tuners.values()):
        events = _timings(log)
        ended = {(e["pid"], e["id"]) for e in events if e["event"] == "end"}
        # whichever tuner is first seen timing a config (not the default) is killed while it does
        victim, in_flight = next(((e["pid"], e["id"]) for e in events if e["event"] == "start"
                                  and e["id"] != "default" and (e["pid"], e["id"]) not in ended), (None, None))
        time.sleep(0.02)
    assert victim is not None, "no tuner was seen timing a config"
    with Store.open(url, read_only=True) as store:
        (workload,) = store.workloads()
        finished_before = {t.id: t for t in store.trials(workload.id) if t.status != TrialStatus.RUNNING}
    tuners[victim].send_signal(signal.SIGKILL)
    tuners.pop(victim).wait()
    with Store.open(url, read_only=True) as store:  # did the kill land before the victim recorded it?
        left_running = any(config_id(t.config) == in_flight and t.status == TrialStatus.RUNNING
                           for t in store.trials(workload.id))
    (survivor,) = tuners.values()
    stdout, stderr = survivor.communicate(timeout=600)
    assert survivor.returncode == 0, stderr[-3000:]
    trials = assert_study_whole(url)
    by_id = {t.id: t for t in trials}
    assert all(by_id[id] == trial for id, trial in finished_before.items())  # nothing recorded changed
    # The survivor asks the same configs (same seed and budget): it re-claimed the killed one at once.
    [killed] = [t for t in trials if config_id(t.config) == in_flight]
    assert killed.status in FINAL_STATUSES
    if left_running and killed.status == TrialStatus.OK:  # then only the survivor can have recorded it
        assert survivor.pid in [e["pid"] for e in _timings(log) if e["id"] == in_flight and e["event"] == "end"]


# -- a Ray cluster of two nodes on this machine ---------------------------------------------------

@pytest.fixture
def timing_log(tmp_path, monkeypatch) -> Path:
    log = tmp_path / "timings.jsonl"
    monkeypatch.setenv("XTAT_TEST_TIMING_LOG", str(log))
    return log


@pytest.fixture
def ray_cluster(timing_log):
    """A head node and a second node, one CPU and one `xtat_device` unit each, as `ray start` makes
    them (their workers log their timings to `timing_log`); stopped after the test. Yields the
    cluster (`ray.cluster_utils.Cluster`) and the second node."""
    import ray
    from ray.cluster_utils import Cluster

    node = dict(num_cpus=1, resources={"xtat_device": 1})
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    second = cluster.add_node(**node)
    cluster.wait_for_nodes()
    try:
        yield cluster, second
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_a_run_on_a_two_node_ray_cluster_uses_both_and_survives_a_node_killed_mid_run(
        ray_cluster, timing_log, postgres_database):
    cluster, second = ray_cluster
    url, log = postgres_database(), timing_log
    killed: list[str] = []

    def on_trial(event) -> None:
        # Once each node has finished a trial, kill the second: it is measuring a config, or gets
        # one next (the loop gives a worker a config as soon as it is free).
        with Store.open(url, read_only=True) as store:
            nodes = {t.node for w in store.workloads() for t in store.trials(w.id) if t.node}
        if not killed and len(nodes) == 2:
            killed.append(second.node_id[:8])
            cluster.remove_node(second, allow_graceful=False)

    with pytest.raises(UserError, match="offers 2 'xtat_device' unit"):  # one worker per device unit
        xtat.tune(tiny_mlp(), db=url, executor=f"ray:{cluster.address}", workers=3, stages=("codegen",), **FAST)
    result = xtat.tune(tiny_mlp(), db=url, executor=f"ray:{cluster.address}", workers=2, stages=("codegen",),
                       budget=8, on_trial=on_trial, **FAST)
    assert killed, "the second node never finished a trial"
    trials = assert_study_whole(url)
    nodes = Counter(t.node.split("/")[1] for t in trials if t.config and t.node)
    assert len(nodes) == 2 and killed[0] in nodes, nodes  # measured on both nodes, recorded per trial
    lost = [t for t in trials if t.lost_nodes]
    assert lost and all(killed[0] in t.lost_nodes[0] for t in lost)  # recorded, then retried
    assert all(killed[0] not in t.node for t in lost)  # retried elsewhere: measured on the surviving node
    events = _timings(log)
    for node in {e["node"] for e in events}:  # one device unit per node: never two timings at once there
        assert_never_two_timings_at_once([e for e in events if e["node"] == node])
    assert result.finalists or result.message  # the same adoption as a local run decided
    with Store.open(url, read_only=True) as store:
        (workload,) = store.workloads()
        assert len(store.results(workload.id)) == 1


@pytest.mark.parametrize("settings, message", [
    (dict(workers=2), "--workers above 1 needs --executor ray"),
    (dict(executor="spark"), "--executor 'spark': choose local, ray"),
    (dict(executor="ray", workers=0), "--workers must be at least 1"),
])
def test_executor_settings_that_cannot_work_are_refused_before_anything_runs(settings, message):
    with pytest.raises(UserError, match=message):
        xtat.TuneSettings(**settings)


def test_the_host_measuring_lock_has_one_holder_at_a_time(tmp_path):
    """Two processes: while one holds the lock, the other's timing waits; the kernel frees it when its
    holder is SIGKILLed."""
    from xtat.runner.host_lock import holding

    lock = tmp_path / "measure.lock"
    holder = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
from xtat.runner.host_lock import holding
with holding({str(lock)!r}):
    print("held", flush=True)
    time.sleep(60)
"""], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    started = time.monotonic()
    killer = subprocess.Popen(["sh", "-c", f"sleep 1; kill -9 {holder.pid}"])
    with holding(lock):
        waited = time.monotonic() - started
    killer.wait()
    holder.wait()
    assert 0.9 < waited < 30, waited  # it waited for the holder, until the holder was killed
