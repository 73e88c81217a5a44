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
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

import xtat
from processes import marked
from tiny import chunks, tiny_target
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
    starts = [e for e in events if e["event"] == "start"]
    measured = Counter(e["id"] for e in starts)
    timed_by = {config: [e["pid"] for e in sorted(starts, key=lambda e: e["at"]) if e["id"] == config]
                for config in measured}
    # Each config's search timing is one tuner's, never both's; the tuner that decides may time a
    # shortlisted config once more (`tuning.measure.retime`), whichever tuner timed it first, so a
    # config is timed at most twice, and a second timing is the decider's.
    (decider,) = [t.pid for t, o in zip(tuners, outputs) if "(recorded)" not in o["message"]]
    assert measured and all(pids[1:] in ([], [decider]) for pids in timed_by.values()), (timed_by, decider)
    assert max(measured.values()) <= 2, measured
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


@pytest.mark.slow  # ~15 s; the default run loses a worker mid-run on the Ray cluster test below
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


# TEST-ONLY: on the cluster's nodes and in the tuners, every build but CLUSTER_WINNER is 1 ms slower
# per call, so the adoption rule has one right answer.
CLUSTER_WINNER = chunks(4)  # third in the sweep
CLUSTER_FAULT = f"!{config_id(CLUSTER_WINNER)}:run:slow"


@dataclass(frozen=True)
class RayNodes:
    address: str  # the head's, as --executor ray:ADDRESS takes it
    raylets: dict[str, int]  # the raylet's pid of each worker node, by name ("two-cpu", "one-cpu")
    home: str  # the HOME its processes and the tuners that join it run with


def _raylet(port: int) -> int:
    """The pid of the raylet listening on node manager port `port`."""
    for process in psutil.process_iter(["cmdline"]):
        argv = process.info["cmdline"] or []
        if argv and argv[0].endswith("raylet") and f"--node_manager_port={port}" in argv:
            return process.pid
    raise AssertionError(f"no raylet on port {port}")


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ray_nodes(timing_log, tmp_path):
    """A Ray cluster as a team runs one, here on loopback: a head (`ray start --head`, no CPU of its own,
    so no worker runs there) and two worker nodes joined to it as their own processes (`ray start
    --address`), one with two CPUs and one with one. Every process of it inherits this environment
    (the test hooks, the timing log) and a marker, by which all of them are killed afterwards."""
    marker = f"XTAT_TEST_RAY_CLUSTER={os.getpid()}-{time.monotonic_ns()}"
    # A HOME of its own: a local `ray.init()` on this machine leaves ~/.ray/auth_token behind, and a
    # head that finds it there refuses worker nodes without the token.
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, marker.split("=")[0]: marker.split("=")[1], "XTAT_FAULT": CLUSTER_FAULT, "HOME": str(home),
           # The head notices a dead node within ~2 s instead of Ray's default ~30 s.
           "RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "3"}
    ray = str(Path(sys.executable).with_name("ray"))
    address = f"127.0.0.1:{_free_port()}"
    common = ["--node-ip-address", "127.0.0.1", "--disable-usage-stats"]
    ports = {"two-cpu": _free_port(), "one-cpu": _free_port()}
    # `ray start --head` records its address here, and a later `ray.init()` on this machine joins the
    # cluster it names: the file is put back as it was, or a dead cluster's address would stay in it.
    current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    before = current.read_text() if current.exists() else None
    current.unlink(missing_ok=True)  # whatever it names, this cluster is not it
    try:
        subprocess.run([ray, "start", "--head", "--port", address.split(":")[1], "--num-cpus", "0",
                        "--include-dashboard", "false", *common], env=env, check=True, capture_output=True)
        for name, cpus in (("two-cpu", 2), ("one-cpu", 1)):
            subprocess.run([ray, "start", "--address", address, "--num-cpus", str(cpus),
                            "--node-manager-port", str(ports[name]), *common], env=env, check=True,
                           capture_output=True)
        subprocess.run([sys.executable, "-c", f"""
import time, ray
ray.init(address={address!r}, logging_level="ERROR")
deadline = time.monotonic() + 60
while ray.cluster_resources().get("CPU", 0) < 3 and time.monotonic() < deadline:
    time.sleep(0.2)
assert ray.cluster_resources().get("CPU", 0) == 3, ray.cluster_resources()
"""], env=env, check=True, capture_output=True, timeout=120)
        yield RayNodes(address, {name: _raylet(port) for name, port in ports.items()}, str(home))
    finally:
        for pid in marked(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if before is None:
            current.unlink(missing_ok=True)
        else:
            current.write_text(before)


def test_a_run_on_a_ray_cluster_of_separate_nodes_survives_a_node_killed_mid_run(
        ray_nodes, timing_log, postgres_database, tmp_path):
    """`xtat tune --executor ray:ADDRESS` on the cluster `ray_nodes` starts: two workers, spread over the
    two worker nodes. While the one-CPU node's worker times a candidate, its raylet is SIGKILLed. The
    trial records the loss, a replacement worker starts on the two-CPU node's free CPU and measures it,
    the run finishes with every config recorded once, and it adopts the one config the fault leaves
    fast (`CLUSTER_FAULT`), the answer on any machine."""
    url = postgres_database()
    env = {**os.environ, "XTAT_FAULT": CLUSTER_FAULT, "HOME": ray_nodes.home}
    args = ["tune", tiny_target("tiny_chunked_mlp"), "--stages", "program", "--budget", "6", "--json",
            "--adopt-under-load"]
    killed: list[int] = []
    parents: dict[int, int] = {}  # each timing worker's parent: its node's raylet
    stop = threading.Event()

    def watch() -> None:
        """Notes where each timing runs; kills the one-CPU node's raylet once a timing starts there."""
        raylet = ray_nodes.raylets["one-cpu"]
        while not stop.is_set():
            for event in _timings(timing_log):
                if event["event"] != "start" or "/" not in event["node"] or event["pid"] in parents:
                    continue  # the tuner's own timings are on its host, not on a Ray node (host/node id)
                try:
                    parents[event["pid"]] = _parent(event["pid"])
                except (OSError, ValueError):
                    continue
                if parents[event["pid"]] == raylet and not killed:
                    os.kill(raylet, signal.SIGKILL)
                    killed.append(event["pid"])
            time.sleep(0.02)

    cluster = ["--executor", f"ray:{ray_nodes.address}"]
    too_many = subprocess.run([*XTAT, *args, "--db", str(tmp_path / "refused.db"), *cluster, "--workers", "4"],
                              env=env, capture_output=True, text=True, timeout=400)
    assert too_many.returncode == 2 and "offers 3 CPU(s) and each worker holds 1" in too_many.stderr, too_many.stderr
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        on_cluster = subprocess.run([*XTAT, *args, "--db", url, *cluster, "--workers", "2"], env=env,
                                    capture_output=True, text=True, timeout=400)
    finally:
        stop.set()
        watcher.join()
    assert on_cluster.returncode == 0, on_cluster.stderr[-3000:]
    assert killed, "no timing started on the one-CPU node"
    trials = assert_study_whole(url)
    assert len(trials) == 6  # every config once: nothing lost, nothing measured twice
    lost = [t for t in trials if t.lost_nodes]
    assert len(lost) == 1 and lost[0].status == TrialStatus.OK, [(t.config, t.lost_nodes) for t in trials]
    assert lost[0].node.split("/")[1] not in lost[0].lost_nodes[0]  # measured again elsewhere
    assert set(parents.values()) == set(ray_nodes.raylets.values())  # both worker nodes timed candidates
    # The replacement: a third worker process, on the two-CPU node, timed after the loss.
    events = _timings(timing_log)
    after_loss = [e["at"] for e in events if e["event"] == "start" and e["pid"] == killed[0]][0]
    on_two_cpu = {pid for pid, parent in parents.items() if parent == ray_nodes.raylets["two-cpu"]}
    assert len(on_two_cpu) == 2, parents
    replacement = [e for e in events if e["pid"] in on_two_cpu and e["at"] > after_loss]
    assert replacement, "nothing was timed on the two-CPU node after the loss"
    first_seen = {pid: min(e["at"] for e in events if e["pid"] == pid) for pid in on_two_cpu}
    assert max(first_seen.values()) > after_loss  # one of them started after the loss: the replacement
    for node in {e["node"] for e in events}:  # never two timings at once on one node
        assert_never_two_timings_at_once([e for e in events if e["node"] == node])

    # The fault makes one config the answer on any machine (`CLUSTER_FAULT`): the cluster adopts it.
    assert len(on_cluster.stdout.splitlines()) == 1, on_cluster.stdout[-2000:]
    decided = json.loads(on_cluster.stdout)
    assert (decided["adopted"], decided["best_config"]) == (True, CLUSTER_WINNER), \
        (decided["message"], decided["trials"], decided["finalists"])


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
