"""End-to-end tuning with real XLA and real worker processes."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xtat
from tiny import CHUNKED, FAST, chunks, tiny_chunked_mlp, tiny_mlp, tiny_nan_max
from xtat.core.errors import UserError
from xtat.core.space import config_id
from xtat.core.status import FINAL_STATUSES
from xtat.store.sql import Store
from xtat.tuner import TuneSettings
from xtat.tuning.result import AdoptionOutcome

OPTIONS = ("xla_cpu_opt_preset", "xla_backend_optimization_level", "xla_cpu_prefer_vector_width")


def _rows(db):
    with sqlite3.connect(db) as con:
        return con.execute("SELECT id, config_key, status, median_s, error FROM trials ORDER BY id").fetchall()


def test_tune_records_every_trial_and_resumes_without_new_ones(db):
    result = xtat.tune(tiny_mlp(), db=db, budget=5, options=OPTIONS, stages=("codegen",), **FAST)
    assert result.new_trials == 5
    assert sum(result.trials.values()) == 5
    rows = _rows(db)
    assert len(rows) == 5 and all(status in FINAL_STATUSES for _, _, status, _, _ in rows)
    assert result.default_ci_ms[0] <= result.default_ms <= result.default_ci_ms[1]
    assert result.adopted == (result.speedup_ci[0] > 1.0 + TuneSettings().tie_margin)

    again = xtat.tune(tiny_mlp(), db=db, budget=5, options=OPTIONS, stages=("codegen",), **FAST)
    assert again.new_trials == 0
    assert _rows(db) == rows
    # Nothing new measured: the recorded decision is reported, not re-decided.
    assert (again.adopted, again.speedup, again.best_config) == (result.adopted, result.speedup, result.best_config)
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM results").fetchone()[0] == 1


def test_numerics_changing_candidate_is_rejected_as_wrong_result(db):
    # Whether fast min/max drops the NaN is the CPU's codegen (issue 29): asked of this machine first.
    (x,) = tiny_nan_max().args
    fast = jax.jit(tiny_nan_max().fn, compiler_options={"xla_cpu_enable_fast_min_max": True})(x)
    drops_nan = not all(np.array_equal(got, want, equal_nan=True) for got, want in zip(fast, tiny_nan_max().fn(x)))
    result = xtat.tune(tiny_nan_max(), db=db, budget=2, options=("xla_cpu_enable_fast_min_max",), stages=("codegen",),
                       allow_numerics_change=True, rtol=1e-3, **FAST)
    rows = {status: (median, error) for _, key, status, median, error in _rows(db)}
    if drops_nan:
        assert "wrong_result" in rows, rows
        median, error = rows["wrong_result"]
        assert median is None and "NaN" in error
        assert not result.adopted and result.best_config == {}
    else:  # the same values: verified like any other candidate
        assert set(rows) <= {"ok", "duplicate"}, rows


def test_numerics_relaxing_options_need_opt_in():
    with pytest.raises(UserError, match="allow-numerics-change"):
        xtat.tune(tiny_nan_max(), db=None, budget=2, options=("xla_cpu_enable_fast_min_max",))


@pytest.mark.slow  # the loop on FakeRunner (test_loop.py) and real crashes (test_reliability.py) cover it
def test_crashing_candidate_is_recorded_and_the_run_completes(db, monkeypatch):
    victim = chunks(4)  # third of the sweep; every config a build of its own (tiny.py)
    monkeypatch.setenv("XTAT_FAULT", f"{config_id(victim)}:compile:segfault")
    result = xtat.tune(tiny_chunked_mlp(), db=db, budget=5, **CHUNKED)
    store = Store.open(db, read_only=True)
    trials = store.trials(store.workloads()[0].id)
    crashed = [t for t in trials if t.status == "crash"]
    assert [t.config for t in crashed] == [victim]
    assert "SIGSEGV" in crashed[0].error
    # The others were compiled, verified and measured in a new worker.
    others = [t.status for t in trials if t.status != "crash"]
    assert others == ["ok"] * 4, others
    assert result.trials["crash"] == 1


@pytest.mark.slow  # the loop on FakeRunner (test_loop.py) and real hangs (test_reliability.py) cover it
def test_hanging_candidate_is_recorded_as_timeout(db, monkeypatch):
    victim = chunks(4)
    monkeypatch.setenv("XTAT_FAULT", f"{config_id(victim)}:run:hang")
    settings = {**CHUNKED, "min_deadline_s": 3.0, "deadline_factor": 3.0}
    xtat.tune(tiny_chunked_mlp(), db=db, budget=4, **settings)
    statuses = {key: status for _, key, status, _, _ in _rows(db)}
    assert list(statuses.values()) == ["ok", "ok", "timeout", "ok"]
    assert statuses['{"program":{"knob:chunks":4}}'] == "timeout"


def test_workload_failing_to_trace_or_under_default_compile_writes_nothing(db, monkeypatch):
    import jax.numpy as jnp

    def raises(x):
        raise ValueError("boom")

    with pytest.raises(UserError, match="fails to trace"):
        xtat.tune(xtat.Workload(raises, (jnp.ones((2, 2)),)), db=db, budget=2)
    assert not db.exists() or _rows(db) == []
    monkeypatch.setenv("XTAT_FAULT", "default:compile:raise")  # TEST-ONLY: the default build fails
    with pytest.raises(UserError, match="fails under the default compile"):
        xtat.tune(tiny_mlp(), db=db, budget=2, stages=("codegen",), **FAST)
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM workloads").fetchone()[0] == 0
    assert _rows(db) == []


@pytest.mark.slow  # adoption on FakeRunner (test_loop.py) and through real workers (test_confirmation.py) cover it
def test_significantly_faster_candidate_is_adopted_after_reverification(db, monkeypatch):
    # TEST-ONLY fault: every call of the default build sleeps 1 ms, so every
    # candidate is genuinely faster when timed.
    monkeypatch.setenv("XTAT_FAULT", "default:run:slow")
    result = xtat.tune(tiny_chunked_mlp(), db=db, budget=3, **CHUNKED)
    assert result.adopted and result.speedup_ci[0] > 1.0
    assert result.best_config != {}
    chosen = next(f for f in result.finalists if f.config == result.best_config)
    assert chosen.verified_on_second_inputs is True
    store = Store.open(db, read_only=True)
    latest = store.latest_result(store.workloads()[0].id)
    assert latest.adopted and latest.config == result.best_config


@pytest.mark.slow  # demotion on FakeRunner (test_loop.py) and real re-verification (test_reliability.py) cover it
def test_finalist_failing_on_second_inputs_is_demoted_never_adopted(db, monkeypatch):
    monkeypatch.setenv("XTAT_FAULT", "default:run:slow;*:verify:wrong")
    # 11 rounds: with 5, one disturbed round can make the slowed default a tie, and a tie is never verified.
    result = xtat.tune(tiny_chunked_mlp(), db=db, budget=3, **{**CHUNKED, "rounds": 11})
    assert not result.adopted and result.best_config == {}
    demoted = [error for _, key, status, _, error in _rows(db) if status == "wrong_result"]
    assert demoted and all("make_inputs(1)" in error for error in demoted)
    assert result.outcome is AdoptionOutcome.DEMOTED
    rows = _rows(db)
    assert all(status == "wrong_result" for _, key, status, _, _ in rows if key != "{}"), rows  # every candidate


def _callback_on_request(x):
    """A knob whose second choice adds a host callback: jax.export refuses that program."""
    if xtat.knob("log", (False, True), False):
        x = jax.pure_callback(lambda v: v, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return jnp.tanh(x) * 2


def test_a_config_that_cannot_be_exported_is_a_compile_error_and_the_run_goes_on(db):
    x = np.ones((8, 8), np.float32)
    result = xtat.tune(xtat.Workload(_callback_on_request, (x,), name="callback"), db=db, budget=3,
                       stages=("program",), **FAST)
    with sqlite3.connect(db) as con:
        rows = dict(con.execute("SELECT config, status FROM trials").fetchall())
        errors = [e for (e,) in con.execute("SELECT error FROM trials WHERE status='compile_error'")]
    assert rows[json.dumps({"program": {"knob:log": True}}, sort_keys=True)] == "compile_error"
    assert errors and "cannot be exported" in errors[0]
    assert "running" not in rows.values() and not result.adopted


def _spans(events: list[dict], start: str, end: str) -> list[tuple[float, float, str]]:
    """(start, end, id) of each finished span, starts matched to ends in order per build id."""
    open_: dict[str, list[float]] = {}
    spans = []
    for e in events:
        if e["event"] == start:
            open_.setdefault(e["id"], []).append(e["at"])
        elif e["event"] == end and open_.get(e["id"]):
            spans.append((open_[e["id"]].pop(0), e["at"], e["id"]))
    return spans


def test_compile_slots_compile_side_by_side_and_never_while_a_candidate_is_timed(db, tmp_path, monkeypatch):
    # TEST-ONLY: every candidate's compile takes 0.5 s more, so that two slots' compiles overlap.
    log = tmp_path / "timings.jsonl"
    monkeypatch.setenv("XTAT_FAULT", "*:compile:slow")
    monkeypatch.setenv("XTAT_TEST_TIMING_LOG", str(log))
    result = xtat.tune(tiny_chunked_mlp(), db=db, budget=5, compile_slots=2, **CHUNKED)
    events = [json.loads(line) for line in log.read_text().splitlines()]
    compiles = sorted(_spans(events, "compile-start", "compile-end"))
    timings = _spans(events, "start", "end")
    # The search: the default and each of the 4 candidates compiled once and timed once, in its first 5
    # timings. What comes after is finalisation's: a shortlisted candidate is built and timed again
    # (`tuning.measure.retime`), and a finalist built again to be re-measured side by side; whether
    # there are any depends on what the timings show.
    search = sorted(timings)[:5]
    search_end = search[-1][1]
    assert "default" in {t[2] for t in search} and len({t[2] for t in search}) == 5, timings
    searched = Counter(c[2] for c in compiles if c[2] not in ("default", "reference") and c[0] < search_end)
    assert searched == Counter({t[2]: 1 for t in search if t[2] != "default"}), (searched, search)
    assert {t[2] for t in timings} == {t[2] for t in search}  # re-timed: candidates of the search only
    assert any(a[0] < b[1] and b[0] < a[1] for a, b in zip(compiles, compiles[1:])), compiles  # side by side
    for c_start, c_end, c_id in compiles:
        for t_start, t_end, t_id in timings:
            assert c_end <= t_start or t_end <= c_start, f"{c_id} compiled while {t_id} was timed"
    assert sorted(result.trials.items()) == [("ok", 5)]
    split = result.time_split  # where the time went
    assert split.compile_s > 0 and split.timing_s > 0 and 0 < split.search_s < split.wall_s
    store = Store.open(db)
    trials = store.trials(store.workloads()[0].id)
    assert all(t.speedup is not None and len(t.reference_samples) == len(t.samples) for t in trials if t.config)
