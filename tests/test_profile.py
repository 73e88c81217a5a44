"""`xtat profile`: a script run as it is, its programs recorded with their shares; `xtat tune
--profile` tunes the hot ones, keyed as the script compiles them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xtat.store.sql import Store

SCRIPT = Path(__file__).resolve().parent / "support" / "profiled.py"
XTAT = [sys.executable, "-m", "xtat.cli.app"]


def _profile(db, mode: str, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.run([*XTAT, "profile", "--db", str(db), "--name", mode, *extra, "--", sys.executable,
                           str(SCRIPT), mode], capture_output=True, text=True, env=env, timeout=600)


def _stored(db, name: str):
    store = Store.open(db, read_only=True)
    try:
        record = store.latest_profile(name)
        return record, store.profiled_programs(record.id) if record else []
    finally:
        store.close()


def test_every_way_of_reaching_jax_jit_is_recorded_with_the_key_xtat_tune_gives_it(db):
    result = _profile(db, "forms")
    assert result.returncode == 0, result.stderr
    keyed = json.loads([line for line in result.stdout.splitlines() if line.startswith("{")][0])
    record, programs = _stored(db, "forms")
    assert record.complete and record.exit_code == 0
    recorded = {p.fingerprint for p in programs}
    for form, fingerprint in keyed.items():
        if fingerprint:
            assert fingerprint in recorded, form  # each form, the donated one and both signatures
    assert len(programs) >= len(keyed)  # nnx.jit and equinox.filter_jit programs among them
    assert all(p.calls >= 1 and p.run_s > 0 for p in programs)
    assert "profile 'forms'" in result.stdout  # the table is the result: on stdout


def test_a_hot_program_is_kept_with_its_inputs_and_tuned_keyed_as_the_script_compiles_it(db, tmp_path):
    result = _profile(db, "hot")
    assert result.returncode == 0, result.stderr
    record, programs = _stored(db, "hot")
    hot = [p for p in programs if p.exported is not None]
    assert len(hot) == 1 and hot[0].share > 0.05 and hot[0].calls == 300 and hot[0].inputs is not None
    assert all(p.share < 0.05 for p in programs if p.exported is None)

    tuned = subprocess.run([*XTAT, "tune", "--profile", "hot", "--db", str(db), "--budget", "3", "--stages",
                            "codegen", "--effort", "quick", "--confirm-time", "3"],
                           capture_output=True, text=True, timeout=600)
    assert tuned.returncode == 0, tuned.stderr
    store = Store.open(db, read_only=True)
    try:
        workload = store.workload(hot[0].fingerprint)  # the script's own key, not the exported copy's
        assert workload is not None and workload.name == f"hot/{hot[0].name}"
        result = store.latest_result(workload.id)
        assert result is not None
    finally:
        store.close()

    # The user's figure: the whole script plain and under xtat run, beside what the profile predicts.
    compared = subprocess.run([*XTAT, "run", "--compare", "2", "--profile", "hot", "--db", str(db), "--report",
                               str(tmp_path / "report"), "--", sys.executable, str(SCRIPT), "hot"],
                              capture_output=True, text=True, timeout=600)
    assert compared.returncode == 0, compared.stderr
    assert "2 alternating rounds" in compared.stdout and hot[0].fingerprint[:12] in compared.stdout
    expected = f"{result.speedup:.3f}x" if result.adopted else "1.000x"
    assert expected in compared.stdout  # the program's adopted speedup (1 when nothing was adopted)
    page = (tmp_path / "report" / "report.html").read_text()  # the same figure as one HTML file
    assert page.count("<img") == 1 and expected in page and hot[0].fingerprint[:12] in page
    speedup = [line for line in compared.stdout.splitlines() if "x [" in line][0].split("│")[3].strip()
    assert speedup in page


def test_a_script_that_fails_or_is_killed_passes_its_status_through_and_is_never_tuned(db):
    failed = _profile(db, "fail")
    assert failed.returncode == 3
    record, programs = _stored(db, "fail")
    assert not record.complete and record.exit_code == 3 and programs  # what it recorded, marked incomplete
    killed = _profile(db, "kill")
    assert killed.returncode == 128 + 9
    record, programs = _stored(db, "kill")
    assert not record.complete and programs == []  # its recorder never wrote: nothing half-written kept
    for name in ("fail", "kill"):
        refused = subprocess.run([*XTAT, "tune", "--profile", name, "--db", str(db)], capture_output=True, text=True,
                                 timeout=300)
        assert refused.returncode == 2 and "incomplete" in refused.stderr


def test_a_hot_program_with_a_host_callback_is_recorded_and_said_not_tunable(db):
    result = _profile(db, "callback")
    assert result.returncode == 0, result.stderr
    record, programs = _stored(db, "callback")
    hot = [p for p in programs if p.share >= 0.05]
    assert len(hot) == 1 and hot[0].exported is None and "cannot be exported" in hot[0].not_tunable
    assert "cannot be exported" in result.stdout  # the table says why it is not kept


# Stand-ins for scripts, run for real (plain, under `xtat run`, on one CPU), each reporting the wall
# time it stands for to the clock below: a test double of the machine's behaviour, so the choice
# does not rest on this machine's timings. One whose whole run is faster on one CPU, or slower:
_REPORT = "import os, pathlib, sys; pathlib.Path(os.environ['STANDIN_WALL']).write_text(str({}))"
ONE_CPU_FASTER = _REPORT.format("0.05 if len(os.sched_getaffinity(0)) == 1 else 1.0")
ONE_CPU_SLOWER = _REPORT.format("0.4 if len(os.sched_getaffinity(0)) == 1 else 0.05")
# Ones whose programs' configs pay off under `xtat run`, or do not: they read whether `xtat run` started them.
FASTER_UNDER_RUN = _REPORT.format("0.05 if os.environ.get('XTAT_RUN_DB') else 0.8")
NO_FASTER_UNDER_RUN = _REPORT.format("0.05")
# Faster under `xtat run` in every round but its first (a file marks that it ran): faster in most
# rounds, not beyond noise.
ONCE_SLOWER_UNDER_RUN = ("import os, pathlib, sys; mark = pathlib.Path(sys.argv[1]); "
                         "under = bool(os.environ.get('XTAT_RUN_DB')); first = under and not mark.exists(); "
                         "under and mark.touch(); " + _REPORT.format("2.0 if first else 0.05 if under else 0.8"))


@pytest.fixture
def reported_wall(monkeypatch, tmp_path):
    """Test double of the whole-script clock: each run of the command is real, and its wall time is
    the one its stand-in reports."""
    from xtat.profile import session, whole_script

    runs = iter(range(1_000_000))

    def timed_run(argv, env, what, cwd=None):
        report = tmp_path / f"wall-{next(runs)}"
        session.timed_run(argv, {**env, "STANDIN_WALL": str(report)}, what, cwd)
        return float(report.read_text())

    monkeypatch.setattr(whole_script, "timed_run", timed_run)


def test_the_runtime_decision_is_chosen_by_the_whole_scripts_time_and_applied_by_xtat_run(db, tmp_path, reported_wall):
    from xtat.profile.whole_script import choose

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs to tell one from all")
    command = [sys.executable, "-c", ONE_CPU_FASTER]
    choice = choose("stand-in", command, str(tmp_path), db, 6, [])
    assert choice.adopted == {"cpus": 1}, choice.describe()
    assert {json.dumps(w.runtime) for w in choice.ways} >= {'{"cpus": 1}', '{"host_devices": 2}'}
    assert all(w.runtime for w in choice.ways), "with no program config in force, xtat run alone is not a way"
    read_back = subprocess.run([*XTAT, "run", "--db", str(db), "--", sys.executable, "-c",
                                "import os; print(len(os.sched_getaffinity(0)))"], capture_output=True, text=True,
                               timeout=300)
    assert read_back.returncode == 0 and read_back.stdout.strip() == "1", read_back.stderr
    assert "stand-in (whole script)" in read_back.stderr

    # Chosen again where one CPU makes the script slower: it is not adopted, and the earlier choice is withdrawn.
    slower = choose("stand-in", [sys.executable, "-c", ONE_CPU_SLOWER], str(tmp_path), db, 6, [])
    assert "cpus" not in slower.adopted, slower.describe()
    again = subprocess.run([*XTAT, "run", "--db", str(db), "--", sys.executable, "-c",
                            "import os; print(len(os.sched_getaffinity(0)))"], capture_output=True, text=True,
                           timeout=300)
    assert again.stdout.strip() == str(len(os.sched_getaffinity(0))), again.stderr


def _adopted_program(db, fingerprint: str) -> None:
    """A program's adopted compile option, as `xtat tune --profile` would leave it (synthetic record)."""
    from xtat.store.records import ResultDetail

    store = Store.open(db)
    try:
        workload = store.upsert_workload(fingerprint, f"program-{fingerprint}", f"step-{fingerprint}",
                                         {"platform": "cpu"}, {})
        run = store.begin_run(workload, {})
        store.add_result(workload, run, True, {"codegen": {"xla_cpu_use_thunk_runtime": False}}, 0.01, 0.008,
                         (1.25, 1.1, 1.4), ResultDetail())
        store.finish_run(run)
    finally:
        store.close()


def test_a_scripts_program_configs_are_kept_only_where_the_whole_script_is_faster_under_xtat_run(db, tmp_path,
                                                                                               reported_wall):
    from xtat.apply.launch import stored_keys
    from xtat.profile.whole_script import choose

    _adopted_program(db, "fp-pays")
    kept = choose("pays", [sys.executable, "-c", FASTER_UNDER_RUN], str(tmp_path), db, 6, ["fp-pays"], runtime=False)
    assert kept.kept is not None and kept.kept.label == "xtat run" and not kept.withdrawn, kept.describe()
    assert kept.programs == ["step-fp-pays"] and kept.kept.speedup[1] > 1.0
    assert {"fp-pays", "program-fp-pays"} <= stored_keys(Path(db))

    _adopted_program(db, "fp-costs")
    dropped = choose("costs", [sys.executable, "-c", NO_FASTER_UNDER_RUN], str(tmp_path), db, 6,
                     ["fp-costs", "fp-unknown"], runtime=False)
    assert dropped.kept is None and dropped.withdrawn == ["step-fp-costs"], dropped.describe()
    assert "withdrawn" in dropped.describe()
    _adopted_program(db, "fp-mostly")
    mostly = choose("mostly", [sys.executable, "-c", ONCE_SLOWER_UNDER_RUN, str(tmp_path / "ran")], str(tmp_path),
                    db, 6, ["fp-mostly"], runtime=False)
    assert mostly.ways[0].speedup[0] > 1.0 >= mostly.ways[0].speedup[1], mostly.describe()  # the premise
    assert mostly.kept is None and mostly.withdrawn == ["step-fp-mostly"], mostly.describe()
    # Withdrawn: nothing in force for it, so `xtat run` does not even look it up; the other stays.
    keys = stored_keys(Path(db))
    assert "fp-costs" not in keys and "program-fp-costs" not in keys and "fp-pays" in keys
    store = Store.open(db, read_only=True)
    try:
        record = store.workload("fp-costs")
        latest = store.latest_result(record.id)
        assert not latest.adopted and "not faster beyond noise" in latest.detail.note
        assert sum(r.adopted for r in store.results(record.id)) == 1, "the adopted result is kept, not changed"
    finally:
        store.close()


def test_the_signatures_of_one_function_are_hot_together_and_seeded_in_their_ranges(db):
    from xtat.profile.session import latest, profile, workload

    hot = 0.2  # above the small signature's share, below the function's
    found = profile([sys.executable, str(SCRIPT), "signatures"], db, "signatures", hot=hot, keep_bytes=0)
    assert found.complete, found.notes
    functions = [f for f in found.functions if f.kept]
    assert len(functions) == 1 and len(functions[0].kept) == 2 and functions[0].share >= hot
    large, small = functions[0].kept
    assert small.share < hot, "the premise: the small signature alone is not hot"
    assert large.function == small.function and large.function.startswith("<lambda> at ")
    assert small.avals != large.avals and small.calls == 100 and large.calls == 300

    # No inputs kept (keep_bytes=0): each input's range is, and the tuner's inputs lie in it.
    assert large.inputs is None and tuple(large.ranges[1]) == (3, 7) and "seeded inputs" in large.inputs_note
    rebuilt = workload(latest(db, "signatures").functions[0].kept[0], "signatures")
    x, rows = rebuilt.args
    assert rows.dtype == np.int32 and rows.min() >= 3 and rows.max() <= 7 and len(set(rows.tolist())) > 1
    low, high = large.ranges[0]
    assert x.dtype == np.float32 and low <= x.min() and x.max() <= high and x.std() > 0.1 * (high - low)

    tuned = subprocess.run([*XTAT, "tune", "--profile", "signatures", "--db", str(db), "--budget", "3", "--stages",
                            "codegen", "--effort", "quick", "--confirm-time", "3"],
                           capture_output=True, text=True, timeout=600)
    assert tuned.returncode == 0, tuned.stderr
    assert "1 other signature(s)" in tuned.stderr  # checked with the largest's config, or said to keep XLA's defaults
