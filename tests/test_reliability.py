"""Fault injection with real worker processes: no fault loses data or selects a wrong config.

Faults come from the TEST-ONLY hook XTAT_FAULT (src/xtat/runner/faults.py).
Every test ends with `assert_nothing_lost`: SQLite's integrity check passes,
every config has exactly one final status, rows that existed before are
unchanged, the adopted config (if any) is a verified successful trial, no
worker process is left behind, and every failure row carries its error text.
Which test proves which fault of issue 6: docs/reliability.md. Six of the
eight kill-and-resume cases are marked slow (`pytest -m slow -k killed_then_resumed`).
"""

from __future__ import annotations

import json
import os
import re
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
from processes import marked
from tiny import (
    CHUNKED,
    FAST,
    chunked_matmul,
    chunked_mlp,
    chunks,
    mlp,
    tiny_chunked_mlp,
    tiny_chunked_nan_max,
    tiny_mlp,
    tiny_target,
)
from xtat.core.errors import UserError
from xtat.core.space import config_id, config_key
from xtat.core.status import FINAL_STATUSES
from xtat.runner import protocol
from xtat.runner.pool import Pool
from xtat.tuner import TuneResult

# The sweeps here are of tiny.py's `chunks` knob: every config builds an executable of its own on
# any CPU, so a fault meant for one config reaches a build of its own, and the configs after it
# run (codegen options may all rebuild the default's executable on some CPUs: issue 29).
# For tests that need a faster candidate to reach re-verification: with FAST's 5 rounds the
# exact speedup interval is [min, max] of the ratios, and one disturbed round (seen: 0.56x
# for a 7x faster build) makes it a tie.
FINALISING = {**CHUNKED, "rounds": 11}
VICTIM = chunks(4)  # third in the sweep
# The installed command, as users run it. Not `python -m xtat.cli.app`: under -m, CPython 3.11
# exits by SIGINT (-2) instead of with the command's 130 once a KeyboardInterrupt has passed
# through code run by exec() of a string (a dataclass being created in a lazy import, say),
# even though the command caught it (checked: `exec("raise KeyboardInterrupt")` caught, then
# sys.exit(130), gives -2 under -m and 130 as a script).
XTAT = [str(Path(sys.executable).with_name("xtat"))]


MARK = f"XTAT_RELIABILITY_TEST={os.getpid()}"


@pytest.fixture(autouse=True)
def _mark_workers(monkeypatch):
    """Workers inherit this variable, so the leak check sees only this test run's processes."""
    name, value = MARK.split("=")
    monkeypatch.setenv(name, value)


def _workers() -> set[int]:
    """Live worker processes started by this test run (found by the inherited marker)."""
    return marked(MARK, "xtat.runner.worker")


def _rows(db) -> dict[str, tuple]:
    with sqlite3.connect(db) as con:
        return {row[0]: row for row in con.execute(
            "SELECT config_key, status, error, median_s, exe_hash, compile_s, samples FROM trials")}


def assert_nothing_lost(db, before: dict[str, tuple] | None = None, workers_before: set[int] = frozenset()):
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        keys = [row[0] for row in con.execute("SELECT config_key FROM trials")]
        assert len(keys) == len(set(keys)), "a config has more than one row"
        rows = con.execute("SELECT config_key, status, error, median_s FROM trials").fetchall()
        for key, status, error, _median in rows:
            assert status in FINAL_STATUSES, (key, status)
            if status not in ("ok", "duplicate"):
                assert error, f"failure row {key} has no error text"
        latest = con.execute("SELECT adopted, config FROM results ORDER BY id DESC LIMIT 1").fetchone()
        if latest and latest[0]:
            status = con.execute("SELECT status FROM trials WHERE config_key=?",
                                 (config_key(json.loads(latest[1])),)).fetchone()[0]
            assert status == "ok", "the adopted config is not a verified successful trial"
    for key, row in (before or {}).items():
        now = _rows(db)[key]
        # Finalisation may time a shortlisted trial again (`tuning.measure.retime`): its block of
        # pairs is added to the row's, so the earlier samples stay and only the median moves.
        was, has = json.loads(row[6] or "null"), json.loads(now[6] or "null")
        grew = was is not None and has is not None and len(has) > len(was) and has[:len(was)] == was
        assert now == row or (grew and now[:3] + now[4:6] == row[:3] + row[4:6]), f"row {key} changed"
    deadline = time.time() + 10
    while _workers() - set(workers_before) and time.time() < deadline:
        time.sleep(0.2)
    assert not _workers() - set(workers_before), "worker processes left behind"


def _status(db, config) -> tuple:
    return _rows(db)[config_key(config)]


def _tune_watching_workers(workload, db, **settings) -> tuple[TuneResult, list[tuple[str, set[int]]]]:
    """Tune in this process; after each config, note its id and this test run's live worker pids."""
    seen: list[tuple[str, set[int], str]] = []
    result = xtat.tune(workload, db=db, on_trial=lambda event: seen.append((config_id(event.config), _workers(),
                                                                             event.status)), **settings)
    return result, seen


def _next_after(seen: list[tuple[str, set[int], str]], victim: dict) -> tuple[str, set[int], set[int]]:
    """The first config compiled and run after the victim (a duplicate of an earlier build runs
    nothing), its workers, and the workers before the victim."""
    ids = [cid for cid, _, _ in seen]
    at = ids.index(config_id(victim))
    following = next(entry for entry in seen[at + 1:] if entry[2] != "duplicate")
    return following[0], following[1], seen[at - 1][1]


@pytest.mark.parametrize("phase, kind, status, text, restarts", [
    ("compile", "segfault", "crash", "SIGSEGV", True),
    ("run", "raise", "run_error", "injected fault", False),
    ("run", "oom", "oom", "MemoryError", True),  # after an OOM the worker is replaced: all memory free again
])
def test_a_dying_or_failing_candidate_is_recorded_and_the_others_finish(db, monkeypatch, phase, kind, status, text,
                                                                         restarts):
    workers = _workers()
    monkeypatch.setenv("XTAT_FAULT", f"{config_id(VICTIM)}:{phase}:{kind}")
    _, seen = _tune_watching_workers(tiny_chunked_mlp(), db, budget=5, **CHUNKED)
    row = _status(db, VICTIM)
    assert row[1] == status and text in row[2]
    others = [r for k, r in _rows(db).items() if r[0] != _status(db, VICTIM)[0]]
    assert len(others) == 4 and all(r[1] in ("ok", "duplicate") for r in others)
    if restarts:  # the next candidate ran in a new worker process, the old one is gone
        _, next_workers, earlier_workers = _next_after(seen, VICTIM)
        assert next_workers and next_workers.isdisjoint(earlier_workers)
    assert_nothing_lost(db, workers_before=workers)
    # On resume the failed config is not tried again.
    before = _rows(db)
    again = xtat.tune(tiny_chunked_mlp(), db=db, budget=5, **CHUNKED)
    assert again.new_trials == 0
    assert_nothing_lost(db, before, workers)


def test_a_worker_that_dies_running_one_of_its_builds_side_by_side_names_that_build(tmp_path, monkeypatch):
    """The finalists share a worker when placed side by side: the failure must name the build that
    killed it (adoption demotes that one and measures the rest again), not the worker's others."""
    from xtat.capture.workload import capture
    from xtat.core.candidate import Candidate
    from xtat.runner.base import WorkerFailure
    from xtat.runner.process import ProcessRunner
    from xtat.tuning.settings import TuneSettings

    monkeypatch.setenv("XTAT_FAULT", "victim:run:segfault")
    captured = capture(tiny_mlp())
    runner = ProcessRunner(tmp_path, captured.exported, captured.inputs, captured.verify_inputs,
                           lambda program, layout: b"", 60.0, 10.0, 20.0)
    builds = [("default", Candidate()), ("other", Candidate(compile_options={"xla_cpu_prefer_vector_width": 128})),
              ("victim", Candidate(compile_options={"xla_cpu_prefer_vector_width": 512}))]
    try:
        runner.start()
        with pytest.raises(WorkerFailure) as failure:
            runner.interleave(builds, 3, TuneSettings(**FAST).timing)
        assert failure.value.build == "victim" and "SIGSEGV" in failure.value.error
        assert runner.interleave(builds[:2], 3, TuneSettings(**FAST).timing)  # the others still run
    finally:
        runner.close()


@pytest.mark.slow  # a measurement-quality check (~30 s); the default run kills workers in the tests above
def test_after_an_abort_the_next_candidate_runs_in_a_fresh_worker_and_times_as_when_alone(db, tmp_path, monkeypatch):
    workers = _workers()
    # Every candidate fully timed (no racing), with more and longer samples than FAST, so that
    # the fastest sample comes from a quiet moment of this shared machine.
    # Budget 5: the sweep's fourth config, chunks(8), is the first build after VICTIM's.
    timed = {**CHUNKED, "budget": 5, "samples": 15, "min_sample_s": 0.02, "race_margin": None}
    monkeypatch.setenv("XTAT_FAULT", f"{config_id(VICTIM)}:run:abort")
    _, seen = _tune_watching_workers(tiny_chunked_mlp(), db, **timed)
    row = _status(db, VICTIM)
    assert row[1] == "crash" and "SIGABRT" in row[2]
    next_id, next_workers, earlier_workers = _next_after(seen, VICTIM)
    assert next_workers and next_workers.isdisjoint(earlier_workers)
    monkeypatch.delenv("XTAT_FAULT")
    alone = tmp_path / "alone.db"
    xtat.tune(tiny_chunked_mlp(), db=alone, **timed)

    def fastest_sample(path, measured_in_this_run: bool) -> float:
        """The next candidate's fastest timing sample (or that of the trial whose executable it
        shares): on this shared machine a neighbour's load moves medians by 2x between runs
        (seen), the least disturbed sample far less."""
        with sqlite3.connect(path) as con:
            trials = {id: (config_id(json.loads(config)), samples, same_as) for id, config, samples, same_as in
                      con.execute("SELECT id, config, samples, same_as FROM trials")}
        [(_, samples, same_as)] = [trial for trial in trials.values() if trial[0] == next_id]
        assert not (measured_in_this_run and same_as), "the next candidate was not timed after the abort"
        return min(json.loads(samples if same_as is None else trials[same_as][1]))

    # A bound that a busy neighbour cannot cross: 2.1x and 3.9x were seen at load average 8
    # on 2 cores with 9 samples of 10 ms; a worker left degraded by the abort is not bounded.
    ratio = fastest_sample(db, True) / fastest_sample(alone, False)
    assert 0.25 < ratio < 4.0, f"after the abort the next candidate timed {ratio:.2f}x its time when measured alone"
    assert_nothing_lost(db, workers_before=workers)
    before = _rows(db)
    assert xtat.tune(tiny_chunked_mlp(), db=db, **timed).new_trials == 0  # the aborting config is not retried
    assert_nothing_lost(db, before, workers)


def test_a_worker_started_from_a_thread_that_ends_stays_alive(tmp_path):
    """Linux's parent-death signal follows the *thread* that started a child: workers started
    from a tuning slot's thread were killed (SIGKILL, recorded as out-of-memory) when the search's
    slot threads ended, and the finalists' re-timing found them dead (a flaky kill-and-resume run)."""
    pool = Pool(tmp_path)
    started: list = []

    def start() -> None:
        worker, _ = pool.get()
        assert isinstance(worker.request(protocol.Release(()), 120), protocol.Done)  # its signal is set by now
        started.append(worker)

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    try:
        time.sleep(0.5)
        assert started and started[0].alive(), started[0].process.returncode if started else "never started"
        assert isinstance(started[0].request(protocol.Release(()), 60), protocol.Done)
    finally:
        pool.close()


@pytest.mark.parametrize("phase, kind", [
    ("compile", "hang_hard"),  # a compile that also ignores SIGTERM: the process group gets SIGKILL
    ("run", "hang"),  # a run that never ends
])
def test_a_hang_is_killed_at_a_deadline_from_the_defaults_times_without_orphans(db, monkeypatch, phase, kind):
    workers = _workers()
    monkeypatch.setenv("XTAT_FAULT", f"{config_id(VICTIM)}:{phase}:{kind}")
    start = time.time()
    # The deadlines come from the default's compile and run times (x3, at least 3 s), not
    # from the 100 s allowed for a worker's start-up.
    # Budget 4: the default, chunks(2), VICTIM, chunks(8).
    xtat.tune(tiny_chunked_mlp(), db=db, budget=4,
              **{**CHUNKED, "min_deadline_s": 3.0, "deadline_factor": 3.0, "startup_deadline_s": 100.0})
    assert time.time() - start < 100
    row = _status(db, VICTIM)
    assert row[1] == "timeout" and "deadline" in row[2]
    deadline_s = float(re.search(r"deadline of ([0-9.]+) s", row[2]).group(1))
    assert deadline_s < 30
    assert sum(r[1] == "ok" for r in _rows(db).values()) >= 2  # the run went on
    assert_nothing_lost(db, workers_before=workers)


def test_config_wrong_a_third_of_the_time_is_demoted_by_repeated_verification(db, monkeypatch):
    # TEST-ONLY: the default is slowed so every candidate is a finalist; every
    # candidate's outputs are perturbed on every third check of make_inputs(1).
    monkeypatch.setenv("XTAT_FAULT", "default:run:slow;*:verify:flaky")
    result = xtat.tune(tiny_chunked_mlp(), db=db, budget=3, **FINALISING)
    assert not result.adopted
    demoted = [r for r in _rows(db).values() if r[1] == "wrong_result"]
    assert demoted and all("make_inputs(1)" in r[2] for r in demoted)
    assert_nothing_lost(db)


@pytest.mark.slow  # ~21 s; the default run rejects wrong results in this file's NaN-policy and demotion tests
def test_the_fastest_config_computing_subtly_wrong_numbers_is_rejected_and_the_winner_reverified(db, monkeypatch):
    # TEST-ONLY: the default is slowed, so every candidate is faster; the victim's outputs are 1% off.
    monkeypatch.setenv("XTAT_FAULT", f"default:run:slow;{config_id(VICTIM)}:run:wrong")
    result = xtat.tune(tiny_chunked_mlp(), db=db, budget=5, **FINALISING)
    with sqlite3.connect(db) as con:
        status, error, median, max_abs, max_rel = con.execute(
            "SELECT status, error, median_s, max_abs_err, max_rel_err FROM trials WHERE config_key=?",
            (config_key(VICTIM),)).fetchone()
    assert status == "wrong_result" and median is None
    assert "beyond the element bound (rtol=0.0001 atol=1e-05" in error  # the rule it failed, in the error text
    assert max_abs > 0 and max_rel == pytest.approx(0.01, rel=0.05)  # and the error itself
    assert result.adopted and result.best_config != VICTIM
    chosen = next(f for f in result.finalists if f.config == result.best_config)
    assert chosen.verified_on_second_inputs is True
    assert_nothing_lost(db)


@pytest.mark.parametrize("kind, text", [("nan", "NaN at 1 other positions"), ("inf", "Inf at other positions")])
def test_nan_policy_same_positions_pass_others_are_rejected_and_never_selected(db, monkeypatch, kind, text):
    """tiny_chunked_nan_max's reference has NaN in row 3 of its max and column 5 of its min: a
    candidate must have NaN exactly there, and a non-finite value anywhere else fails it."""
    # TEST-ONLY: the victim is the only build without a 1 ms slowdown, so it would win,
    # but it puts a NaN (or Inf) where the reference is finite.
    victim = config_id(VICTIM)
    monkeypatch.setenv("XTAT_FAULT", f"!{victim}:run:slow;{victim}:run:{kind}")
    result = xtat.tune(tiny_chunked_nan_max(), db=db, budget=3, **CHUNKED)
    rows = _rows(db)
    bad = rows[config_key(VICTIM)]
    assert bad[1] == "wrong_result" and text in bad[2] and bad[3] is None
    others = [r for k, r in rows.items() if k != config_key(VICTIM)]
    # NaN at the reference's positions: verified.
    assert len(others) == 2 and all(r[1] == "ok" for r in others)
    assert not result.adopted and result.best_config != VICTIM
    assert_nothing_lost(db)


# -- the tuner killed at several points, then resumed ------------------------------------------

WINNER = VICTIM  # third in the sweep
KILL_BUDGET = 4
# TEST-ONLY: every build but the winner is 1 ms slower per call, so "the same best" is not
# left to timing noise between near-identical configs.
CLEAR_WINNER = f"!{config_id(WINNER)}:run:slow"
# Where the tuner is stopped: a fault that holds it there (a hang until its deadline, well
# after the kill) and the config in flight at that moment (None: every trial has finished).
KILL_POINTS = {
    "default": ("default:run:hang", config_key({})),
    "compile": (f"{config_id(WINNER)}:compile:hang", config_key(WINNER)),
    "timing": (f"{config_id(WINNER)}:run:hang", config_key(WINNER)),
    "finalisation": (f"{config_id(WINNER)}:verify:hang", None),  # the winner's re-verification
}


def _tune_command(db) -> list[str]:
    return [*XTAT, "tune", tiny_target("tiny_chunked_mlp"), "--db", str(db), "--budget", str(KILL_BUDGET),
            "--stages", "program", "--json", "--adopt-under-load"]


def _tune_to_the_end(db) -> dict:
    result = subprocess.run(_tune_command(db), capture_output=True, text=True, timeout=300,
                            env={**os.environ, "XTAT_FAULT": CLEAR_WINNER})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _reached(db, in_flight: str | None) -> bool:
    try:
        rows = _rows(db)
        if in_flight is not None:
            return rows.get(in_flight, (None, None))[1] == "running"
        with sqlite3.connect(db) as con:
            finalising = con.execute("SELECT count(*) FROM results").fetchone()[0] == 0
        return finalising and len(rows) == KILL_BUDGET and all(r[1] != "running" for r in rows.values())
    except sqlite3.OperationalError:  # not created yet, or locked for a moment
        return False


# Each case is two real CLI runs (about half a minute on the 2-core machine): one in the default
# run, every point with SIGKILL, SIGINT or SIGTERM in `pytest -m slow -k killed_then_resumed`. The
# default one is Ctrl-C while a compile slot's thread waits on a hung compile: the run must stop at
# once and leave that trial to be measured again, not wait out its deadline and record a timeout.
@pytest.mark.parametrize("point, sig", [
    ("compile", signal.SIGINT),
    *(pytest.param(point, sig, marks=pytest.mark.slow) for point, sig in [
        ("finalisation", signal.SIGINT), ("timing", signal.SIGTERM),
        ("default", signal.SIGKILL), ("default", signal.SIGINT), ("compile", signal.SIGKILL),
        ("timing", signal.SIGKILL), ("timing", signal.SIGINT), ("finalisation", signal.SIGKILL)]),
], ids=lambda value: value.name if isinstance(value, signal.Signals) else value)
def test_tuner_killed_then_resumed_keeps_finished_rows_reruns_the_in_flight_one_and_finds_the_same_best(
        db, point, sig):
    workers = _workers()
    fault, in_flight = KILL_POINTS[point]
    # As started from a terminal: a test run launched in the background inherits SIGINT ignored,
    # and Python (like the shell's background jobs) then leaves it ignored in the tuner.
    tuner = subprocess.Popen(_tune_command(db), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                             env={**os.environ, "XTAT_FAULT": f"{CLEAR_WINNER};{fault}"})
    deadline = time.time() + 240
    while not _reached(db, in_flight):
        assert tuner.poll() is None and time.time() < deadline, f"the tuner never reached {point}"
        time.sleep(0.2)
    time.sleep(3)  # past the compile before the timing, into the hang (its deadline is >= 30 s)
    assert _reached(db, in_flight), f"the tuner moved on from {point} before the kill"
    tuner.send_signal(sig)
    _, stderr = tuner.communicate(timeout=60)
    if sig == signal.SIGINT:
        assert tuner.returncode == 130 and "resume" in stderr, (tuner.returncode, stderr[-3000:])
    elif sig == signal.SIGTERM:  # the same clean stop as Ctrl-C, with the conventional 128 + 15
        assert tuner.returncode == 143 and "terminated" in stderr and "resume" in stderr, (
            tuner.returncode, stderr[-3000:])
    else:
        assert tuner.returncode == -signal.SIGKILL, (tuner.returncode, stderr[-3000:])
    rows = _rows(db)
    before = {k: r for k, r in rows.items() if r[1] != "running"}
    assert [k for k, r in rows.items() if r[1] == "running"] == ([in_flight] if in_flight else [])

    resumed = _tune_to_the_end(db)
    rows = _rows(db)
    assert len(rows) == KILL_BUDGET
    if in_flight is not None:  # measured again, under its old row
        assert rows[in_flight][1] == "ok"
    # The best an uninterrupted run finds: CLEAR_WINNER makes it WINNER by a margin no noise closes.
    assert resumed["adopted"] and resumed["best_config"] == WINNER, resumed["message"]
    assert_nothing_lost(db, before, workers)


SHARED_WINNER = VICTIM  # in both tuners' sweeps


@pytest.mark.slow  # ~40 s; the default run has two tuners on one study (test_scale.py) and a reader meeting
# a store mid-creation (below)
def test_two_tuners_and_a_jit_reader_share_one_database(db):
    workers = _workers()
    # Two tuners load the machine for each other: adoption under load is what this test wants.
    base = [*XTAT, "tune", tiny_target("tiny_chunked_mlp"), "--db", str(db), "--stages", "program", "--json",
            "--adopt-under-load"]
    # Both tuners search SHARED_WINNER; whoever measures it, it is fastest.
    env = {**os.environ, "XTAT_FAULT": f"!{config_id(SHARED_WINNER)}:run:slow"}
    first = subprocess.Popen([*base, "--budget", "6", "--seed", "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    second = subprocess.Popen([*base, "--budget", "4"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    errors: list[str] = []
    stop = threading.Event()

    def read() -> None:  # production lookups while both tuners write
        while not stop.is_set():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                xtat.jit(chunked_mlp, db=db)(*tiny_chunked_mlp().args)
            errors.extend(str(w.message) for w in caught
                          if "locked" in str(w.message) or "unreadable" in str(w.message))
            time.sleep(0.1)

    reader = threading.Thread(target=read)
    reader.start()
    results = []
    try:
        for tuner in (first, second):
            stdout, stderr = tuner.communicate(timeout=400)
            assert tuner.returncode == 0, stderr[-2000:]
            assert "locked" not in stderr
            results.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        stop.set()
        reader.join()
    assert not errors
    rows = _rows(db)
    assert len(rows) == 6  # the second tuner's 4 configs are the first 4 of the first's 6
    # The best is the minimum over both runs: each adopts SHARED_WINNER, whichever of them measured it.
    assert all(result["adopted"] and result["best_config"] == SHARED_WINNER for result in results), (
        [(r["adopted"], r["best_config"], r["trials"], r.get("message"), r.get("finalists")) for r in results],
        sorted(rows.values()))
    assert_nothing_lost(db, workers_before=workers)


def test_a_reader_meeting_a_database_file_before_its_tables_is_a_miss_not_an_error(db):
    """The instant between a tuner creating the file and committing its schema (seen by the
    reader of the test above): `xtat.jit` reports no database and does not call it unreadable."""
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA journal_mode=WAL")  # what a tuner's first statement leaves behind
    with pytest.warns(UserWarning, match=r"\(no database\)"):
        xtat.jit(mlp, db=db)(*tiny_mlp().args)


@pytest.mark.slow  # 100 runs' worth of timing (~25 s): the interval's error rate, measured
def test_no_improvement_is_claimed_between_equal_configs_on_a_noisy_machine(tmp_path):
    """100 seeded runs of the adoption rule on real interleaved timings of two identical
    builds, with a busy neighbour process: at most 5 may claim a significant speedup."""
    import numpy as np

    from xtat.capture.workload import capture
    from xtat.core.candidate import Candidate
    from xtat.runner.base import DEFAULT_ID
    from xtat.runner.process import ProcessRunner
    from xtat.runner.timing import TimingPolicy, speedup_ci
    from xtat.tuner import TuneSettings

    captured = capture(tiny_mlp())
    runner = ProcessRunner(tmp_path, captured.exported, captured.inputs, None, lambda program, layout: b"",
                           startup_deadline_s=120, deadline_factor=10, min_deadline_s=30)
    spin = "import time\nend=time.time()+600\nwhile time.time()<end: pass"
    neighbour = subprocess.Popen([sys.executable, "-c", spin])
    runs, rounds = 100, 11
    try:
        pairs = runner.interleave([(DEFAULT_ID, Candidate()), ("b", Candidate())], runs * rounds,
                                  TimingPolicy(min_sample_s=0.003))
    finally:
        neighbour.kill()
        runner.close()
    assert pairs is not None
    a, b = (np.asarray([pair[side] for pair in pairs["b"]]).reshape(runs, rounds) for side in (0, 1))
    margin = TuneSettings().tie_margin
    stats = [speedup_ci(list(a[k]), list(b[k]), seed=k) for k in range(runs)]
    # A claim in either direction: one of two identical builds declared faster.
    claims = sum(low > 1 + margin or high < 1 / (1 + margin) for _, low, high in stats)
    assert claims <= 5, f"{claims} of {runs} runs claimed a speedup between identical builds"
    # The interval and margin are what protect: the bare median ratio always picks a side.
    assert sum(median != 1.0 for median, _, _ in stats) >= 95


@pytest.mark.slow  # a real tune under a full disk, ~45 s
def test_disk_full_during_a_write_rolls_back_and_exits_clearly(db, monkeypatch):
    workers = _workers()
    xtat.tune(tiny_mlp(), db=db, budget=2, stages=("codegen",), **FAST)
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
    result = xtat.tune(tiny_chunked_mlp(), db=db, budget=3, **CHUNKED)
    lazy = [r for k, r in _rows(db).items() if k != "{}" and r[1] != "duplicate"]  # a duplicate runs nothing
    assert lazy and all(r[1] == "wrong_result" and "second input set" in r[2] for r in lazy)
    assert not result.adopted
    assert_nothing_lost(db)


def test_impossibly_fast_candidates_are_rejected(db, monkeypatch):
    import jax.numpy as jnp
    import numpy as np

    def heavy(x):  # ~ms of work; a stale result comes back in microseconds
        for _ in range(20):
            x = jnp.tanh(chunked_matmul(x, x.T)) @ x
        return x.sum()

    x = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32) * 0.05
    monkeypatch.setenv("XTAT_FAULT", "*:run:lazy")  # no make_inputs: only the timing can tell
    result = xtat.tune(xtat.Workload(heavy, (x,), name="heavy"), db=db, budget=3, **CHUNKED)
    lazy = [r for k, r in _rows(db).items() if k != "{}"]
    assert lazy and all(r[1] == "wrong_result" and "impossibly fast" in r[2] for r in lazy)
    assert not result.adopted
    assert_nothing_lost(db)


@pytest.mark.parametrize("options, message", [
    (("xla_no_such_option",), "xla_no_such_option"),
    (("xla_cpu_enable_fast_min_max",), "allow-numerics-change"),
])
def test_malformed_options_are_refused_before_anything_runs_or_is_written(db, options, message):
    workers = _workers()
    with pytest.raises(UserError, match=message):
        xtat.tune(tiny_mlp(), db=db, budget=3, options=options, stages=("codegen",), **FAST)
    assert not db.exists()
    assert _workers() == workers  # no worker was started


# -- test hooks off in production; private files; killed runs' folders (issue 15, point 8) --

def test_fault_hooks_do_nothing_without_the_test_switch(monkeypatch, db):
    from xtat.runner import faults
    from xtat.store.sql import Store

    monkeypatch.setenv("XTAT_FAULT", "*:compile:raise")
    with pytest.raises(RuntimeError, match="injected fault"):
        faults.inject("c1", "compile", False)
    monkeypatch.delenv("XTAT_TEST_HOOKS")
    faults.inject("c1", "compile", False)  # a stray variable in production changes nothing
    monkeypatch.setenv("XTAT_TEST_MAX_PAGES", "1")
    Store.open(db).close()  # one page would be a full disk under the switch


def test_the_database_file_is_readable_by_its_owner_only(db):
    from xtat.store.sql import Store

    Store.open(db).close()
    assert db.stat().st_mode & 0o777 == 0o600


def test_a_killed_runs_folder_is_removed_by_the_next_run(tmp_path, monkeypatch):
    import tempfile

    from xtat.tuning.session import OWNER_FILE, remove_abandoned_folders

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    abandoned, live, foreign = tmp_path / "xtat-run-abandoned", tmp_path / "xtat-run-live", tmp_path / "other"
    for folder, pid in ((abandoned, dead.pid), (live, os.getppid()), (foreign, dead.pid)):
        folder.mkdir()
        (folder / OWNER_FILE).write_text(str(pid))
    remove_abandoned_folders()
    assert not abandoned.exists() and live.exists() and foreign.exists()


def test_a_build_that_writes_into_its_inputs_is_refused_and_the_inputs_restored():
    import jax
    import numpy as np

    from xtat.runner.worker import Worker

    worker = Worker()
    x = np.arange(4, dtype=np.float32)
    worker.pristine["main"] = [x]
    # What a build with copy-insertion off did: its argument buffer changed under the worker.
    worker.inputs["main"] = ((jax.device_put(x + 1),), {})
    with pytest.raises(RuntimeError, match="wrote into its input buffers"):
        worker._inputs_intact("main")
    assert np.array_equal(np.asarray(worker.inputs["main"][0][0]), x)
    worker._inputs_intact("main")  # intact now
