"""Fault injection with real worker processes: no fault loses data or selects a wrong config.

Faults come from the TEST-ONLY hook XTAT_FAULT (src/xtat/runner/faults.py).
Every test ends with `assert_nothing_lost`: SQLite's integrity check passes,
every config has exactly one final status, rows that existed before are
unchanged, the adopted config (if any) is a verified successful trial, no
worker process is left behind, and every failure row carries its error text.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

import xtat
from tiny import FAST, mlp, tiny_mlp, tiny_target
from xtat.space.space import config_id
from xtat.store.sqlite import FINAL_STATUSES

OPTIONS = ("xla_cpu_opt_preset", "xla_backend_optimization_level", "xla_cpu_prefer_vector_width")
CODEGEN = dict(options=OPTIONS, stages=("codegen",), **FAST)
VICTIM = {"codegen": {"xla_backend_optimization_level": 1}}
XTAT = [sys.executable, "-m", "xtat.cli.app"]


MARK = f"XTAT_RELIABILITY_TEST={os.getpid()}"


@pytest.fixture(autouse=True)
def _mark_workers(monkeypatch):
    """Workers inherit this variable, so the leak check sees only this test run's processes."""
    name, value = MARK.split("=")
    monkeypatch.setenv(name, value)


def _workers() -> set[int]:
    """Live worker processes started by this test run (found by the inherited marker)."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
                state = (entry / "stat").read_text().split()[2]
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"xtat.runner.worker" in cmdline and state != "Z" and MARK.encode() in environ:
                pids.add(int(entry.name))
    return pids


def _rows(db) -> dict[str, tuple]:
    with sqlite3.connect(db) as con:
        return {row[0]: row for row in con.execute(
            "SELECT config_key, status, error, median_s, exe_hash, compile_s FROM trials")}


def assert_nothing_lost(db, before: dict[str, tuple] | None = None, workers_before: set[int] = frozenset()):
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        keys = [row[0] for row in con.execute("SELECT config_key FROM trials")]
        assert len(keys) == len(set(keys)), "a config has more than one row"
        rows = con.execute("SELECT config_key, status, error, median_s FROM trials").fetchall()
        for key, status, error, median in rows:
            assert status in FINAL_STATUSES, (key, status)
            if status not in ("ok", "duplicate"):
                assert error, f"failure row {key} has no error text"
        latest = con.execute("SELECT adopted, config FROM results ORDER BY id DESC LIMIT 1").fetchone()
        if latest and latest[0]:
            import json

            from xtat.space.space import config_key

            status = con.execute("SELECT status FROM trials WHERE config_key=?",
                                 (config_key(json.loads(latest[1])),)).fetchone()[0]
            assert status == "ok", "the adopted config is not a verified successful trial"
    for key, row in (before or {}).items():
        assert _rows(db)[key] == row, f"row {key} changed"
    deadline = time.time() + 10
    while _workers() - set(workers_before) and time.time() < deadline:
        time.sleep(0.2)
    assert not _workers() - set(workers_before), "worker processes left behind"


def _status(db, config) -> tuple:
    from xtat.space.space import config_key

    return _rows(db)[config_key(config)]


@pytest.mark.parametrize("phase, kind, status, text", [
    ("compile", "segfault", "crash", "SIGSEGV"),
    ("run", "abort", "crash", "SIGABRT"),
    ("run", "raise", "run_error", "injected fault"),
    ("run", "oom", "oom", "MemoryError"),
])
def test_a_dying_or_failing_candidate_is_recorded_and_the_others_finish(db, monkeypatch, phase, kind, status, text):
    workers = _workers()
    monkeypatch.setenv("XTAT_FAULT", f"{config_id(VICTIM)}:{phase}:{kind}")
    xtat.tune(tiny_mlp(), db=db, budget=5, **CODEGEN)
    row = _status(db, VICTIM)
    assert row[1] == status and text in row[2]
    others = [r for k, r in _rows(db).items() if r[0] != _status(db, VICTIM)[0]]
    assert len(others) == 4 and all(r[1] in ("ok", "duplicate") for r in others)
    assert_nothing_lost(db, workers_before=workers)
    # On resume the failed config is not tried again.
    before = _rows(db)
    again = xtat.tune(tiny_mlp(), db=db, budget=5, **CODEGEN)
    assert again.new_trials == 0
    assert_nothing_lost(db, before, workers)


def test_compile_that_ignores_sigterm_is_killed_at_its_deadline_without_orphans(db, monkeypatch):
    workers = _workers()
    monkeypatch.setenv("XTAT_FAULT", f"{config_id(VICTIM)}:compile:hang_hard")
    start = time.time()
    xtat.tune(tiny_mlp(), db=db, budget=4, options=OPTIONS, stages=("codegen",),
              **{**FAST, "min_deadline_s": 3.0, "deadline_factor": 3.0})
    assert time.time() - start < 120
    row = _status(db, VICTIM)
    assert row[1] == "timeout" and "deadline" in row[2]
    assert_nothing_lost(db, workers_before=workers)


def test_config_wrong_a_third_of_the_time_is_demoted_by_repeated_verification(db, monkeypatch):
    # TEST-ONLY: the default is slowed so every candidate is a finalist; every
    # candidate's outputs are perturbed on every third check of make_inputs(1).
    monkeypatch.setenv("XTAT_FAULT", "default:run:slow;*:verify:flaky")
    result = xtat.tune(tiny_mlp(), db=db, budget=3, **CODEGEN)
    assert not result.adopted
    demoted = [r for r in _rows(db).values() if r[1] == "wrong_result"]
    assert demoted and all("make_inputs(1)" in r[2] for r in demoted)
    assert_nothing_lost(db)


def test_sigint_then_resume_keeps_finished_rows_and_duplicates_nothing(db):
    workers = _workers()
    args = [*XTAT, "tune", tiny_target("tiny_mlp"), "--db", str(db), "--budget", "8", "--options",
            ",".join(OPTIONS + ("xla_cpu_use_xnnpack",)), "--stages", "codegen"]
    tuner = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while time.time() < deadline:
        time.sleep(0.2)
        try:
            if db.exists() and sum(r[1] != "running" for r in _rows(db).values()) >= 3:
                break
        except sqlite3.OperationalError:
            continue
    tuner.send_signal(signal.SIGINT)
    _, stderr = tuner.communicate(timeout=60)
    assert tuner.returncode == 130 and "resume" in stderr
    before = {k: r for k, r in _rows(db).items() if r[1] != "running"}
    subprocess.run(args, check=True, capture_output=True, timeout=300)
    assert len(_rows(db)) == 8
    assert_nothing_lost(db, before, workers)


def test_two_tuners_and_a_jit_reader_share_one_database(db):
    workers = _workers()
    base = [*XTAT, "tune", tiny_target("tiny_mlp"), "--db", str(db), "--stages", "codegen", "--options"]
    first = subprocess.Popen([*base, ",".join(OPTIONS), "--budget", "6", "--seed", "1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    second = subprocess.Popen([*base, "xla_cpu_use_xnnpack,xla_cpu_multi_thread_eigen", "--budget", "3"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    errors: list[str] = []
    stop = threading.Event()

    def read() -> None:  # production lookups while both tuners write
        while not stop.is_set():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                xtat.jit(mlp, db=db)(*tiny_mlp().args)
            errors.extend(str(w.message) for w in caught if "locked" in str(w.message) or "unreadable" in str(w.message))
            time.sleep(0.1)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for tuner in (first, second):
            _, stderr = tuner.communicate(timeout=400)
            assert tuner.returncode == 0, stderr[-2000:]
            assert "locked" not in stderr
    finally:
        stop.set()
        reader.join()
    assert not errors
    rows = _rows(db)
    assert len(rows) == 6 + 3 - 1  # the default is shared
    ok = [r[3] for r in rows.values() if r[1] == "ok"]
    with sqlite3.connect(db) as con:
        best = con.execute("SELECT min(median_s) FROM trials WHERE status='ok'").fetchone()[0]
    assert best == min(ok)
    assert_nothing_lost(db, workers_before=workers)


def test_no_improvement_is_claimed_between_equal_configs_on_a_noisy_machine(tmp_path):
    """100 seeded runs of the adoption rule on real interleaved timings of two identical
    builds, with a busy neighbour process: at most 5 may claim a significant speedup."""
    import numpy as np

    from xtat.runner.session import Session
    from xtat.runner.timing import TimingPolicy, speedup_ci
    from xtat.stages.base import Candidate
    from xtat.tuner import TuneSettings
    from xtat.workload import capture

    captured = capture(tiny_mlp())
    session = Session(tmp_path, captured.exported, captured.inputs, None, lambda program: b"",
                      startup_deadline_s=120, deadline_factor=10, min_deadline_s=30)
    neighbour = subprocess.Popen([sys.executable, "-c", "import time\nend=time.time()+600\nwhile time.time()<end: pass"])
    runs, rounds = 100, 11
    try:
        timing = {**TimingPolicy(min_sample_s=0.003).__dict__}
        samples = session.interleave([("a", Candidate()), ("b", Candidate())], runs * rounds, timing)
    finally:
        neighbour.kill()
        session.close()
    a, b = np.asarray(samples["a"]).reshape(runs, rounds), np.asarray(samples["b"]).reshape(runs, rounds)
    margin = TuneSettings().tie_margin
    stats = [speedup_ci(list(a[k]), list(b[k]), seed=k) for k in range(runs)]
    # A claim in either direction: one of two identical builds declared faster.
    claims = sum(low > 1 + margin or high < 1 / (1 + margin) for _, low, high in stats)
    assert claims <= 5, f"{claims} of {runs} runs claimed a speedup between identical builds"
    # The interval and margin are what protect: the bare median ratio always picks a side.
    assert sum(median != 1.0 for median, _, _ in stats) >= 95


def test_disk_full_during_a_write_rolls_back_and_exits_clearly(db, monkeypatch):
    workers = _workers()
    xtat.tune(tiny_mlp(), db=db, budget=2, **CODEGEN)
    before = _rows(db)
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = con.execute("PRAGMA page_count").fetchone()[0]
    # TEST-ONLY: SQLite may not grow the file: the next write finds the "disk" full.
    args = [*XTAT, "tune", tiny_target("tiny_mlp"), "--db", str(db), "--budget", "40", "--stages", "codegen"]
    env = {**os.environ, "XTAT_TEST_MAX_PAGES": str(pages)}
    result = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 2
    assert "rolled back" in result.stderr and "full" in result.stderr
    rows = _rows(db)
    assert {k: r for k, r in rows.items() if k in before} == before
    # The write that failed may be the one finishing a trial: that config stays
    # in flight, exactly as after a kill, and a resume measures it again.
    assert sum(r[1] == "running" for r in rows.values()) <= 1
    resumed = subprocess.run(args[:-4] + ["--budget", str(len(rows) + 1), "--stages", "codegen"],
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert_nothing_lost(db, before=before, workers_before=workers)


def test_lazy_candidates_are_caught_by_a_second_input_set(db, monkeypatch):
    monkeypatch.setenv("XTAT_FAULT", "*:run:lazy")  # TEST-ONLY: every candidate returns stale outputs
    result = xtat.tune(tiny_mlp(), db=db, budget=3, **CODEGEN)
    lazy = [r for k, r in _rows(db).items() if k != "{}"]
    assert lazy and all(r[1] == "wrong_result" and "second input set" in r[2] for r in lazy)
    assert not result.adopted
    assert_nothing_lost(db)


def test_impossibly_fast_candidates_are_rejected(db, monkeypatch):
    import jax.numpy as jnp
    import numpy as np

    def heavy(x):  # ~ms of work; a stale result comes back in microseconds
        for _ in range(20):
            x = jnp.tanh(x @ x.T) @ x
        return x.sum()

    x = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32) * 0.05
    monkeypatch.setenv("XTAT_FAULT", "*:run:lazy")  # no make_inputs: only the timing can tell
    result = xtat.tune(xtat.Workload(heavy, (x,), name="heavy"), db=db, budget=3, **CODEGEN)
    lazy = [r for k, r in _rows(db).items() if k != "{}"]
    assert lazy and all(r[1] == "wrong_result" and "impossibly fast" in r[2] for r in lazy)
    assert not result.adopted
    assert_nothing_lost(db)
