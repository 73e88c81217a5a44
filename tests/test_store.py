"""The store: refuses files that are not ours without touching them; export/import."""

from __future__ import annotations

import json
import sqlite3

import pytest

from xtat.errors import StoreError, UserError
from xtat.space.space import config_key
from xtat.status import TrialStatus
from xtat.store.sqlite import SCHEMA_VERSION, Store
from xtat.workload import fingerprint

ENV = {"platform": "cpu", "device_kind": "cpu", "jax": "x", "jaxlib": "x"}
FINGERPRINT = fingerprint("p" * 64, ENV)


def _filled(db) -> Store:
    store = Store.open(db)
    wid = store.upsert_workload(FINGERPRINT, "p" * 64, "w", ENV, {})
    run = store.begin_run(wid, {})
    t = store.start_trial(wid, run, {}, "{}")
    store.finish_trial(t, "ok", median_s=1e-3, ci_low_s=9e-4, ci_high_s=1.1e-3, samples=[1e-3] * 3)
    t = store.start_trial(wid, run, {"codegen": {"a": 1}}, '{"codegen":{"a":1}}')
    store.finish_trial(t, "crash", error="worker killed by SIGSEGV")
    store.add_result(wid, run, False, {}, 1e-3, 1e-3, None, {"reason": "none"})
    return store


def test_not_ours_and_corrupt_and_newer_files_are_refused_unchanged(tmp_path):
    text = tmp_path / "notes.db"
    text.write_text("hello")
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as con:
        con.execute("CREATE TABLE t (x)")
    newer = tmp_path / "newer.db"
    _filled(newer).close()
    with sqlite3.connect(newer) as con:
        con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    truncated = tmp_path / "truncated.db"
    _filled(truncated).close()
    truncated.write_bytes(truncated.read_bytes()[:3000])
    for path, message in ((text, "not an SQLite"), (foreign, "not xtat"), (newer, "newer"),
                          (truncated, "corrupt|integrity|unreadable")):
        before = path.read_bytes()
        with pytest.raises(StoreError, match=message):
            Store.open(path)
        assert path.read_bytes() == before


def test_export_import_round_trip_and_idempotence(tmp_path):
    document = _filled(tmp_path / "a.db").export()
    target = Store.open(tmp_path / "b.db")
    first = target.import_(json.loads(json.dumps(document)))
    assert first.added == {"workloads": 1, "trials": 2, "results": 1} and first.skipped == ()
    again = target.import_(document)
    assert again.added == {"workloads": 0, "trials": 0, "results": 0}
    assert [line.split(": ", 1)[1] for line in again.skipped] == [
        "2 trial(s) already recorded here, kept as they are", "1 result(s) already recorded here"]
    exported = target.export()
    assert [t["status"] for t in exported["workloads"][0]["trials"]] == ["ok", "crash"]


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(xtat_export=2), "not an xtat export"),
    (lambda d: d["workloads"][0]["trials"][0].update(status="great"), "status"),
    (lambda d: d["workloads"][0]["trials"][0].update(median_s="fast"), "median_s"),
    (lambda d: d["workloads"][0]["trials"][0].update(pickle="gASVAAAAAAAAAAB9lC4="), "unknown field"),
    (lambda d: d["workloads"][0]["trials"][1].update(config_key="{}"), "config_key"),
    (lambda d: d["workloads"][0].pop("fingerprint"), "lacks field"),
])
def test_malformed_import_writes_nothing(tmp_path, mutate, message):
    document = _filled(tmp_path / "a.db").export()
    mutate(document)
    target = Store.open(tmp_path / "b.db")
    with pytest.raises(UserError, match=message):
        target.import_(document)
    assert target.export()["workloads"] == []


def test_trial_status_is_final_once(tmp_path):
    store = _filled(tmp_path / "a.db")
    wid = store.workloads()[0].id
    before = store.export()
    assert store.start_trial(wid, None, {}, "{}") is None  # finished (by another tuner): not restarted
    assert store.export() == before


def test_a_version_1_file_is_upgraded_in_place_with_its_rows_unchanged(tmp_path):
    db = tmp_path / "v1.db"
    _filled(db).close()
    with sqlite3.connect(db) as con:  # make it what xtat 0.1 with schema 1 wrote
        con.execute("ALTER TABLE trials DROP COLUMN raced")
        con.execute("ALTER TABLE trials DROP COLUMN metrics")
        con.execute("DROP TABLE machine")
        con.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
        before = con.execute("SELECT * FROM trials ORDER BY id").fetchall()
    store = Store.open(db)
    store.set_machine_fact("peaks", {"flops": 1.0})
    assert store.machine_fact("peaks") == {"flops": 1.0}
    store.close()
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
        assert [row[:-2] for row in con.execute("SELECT * FROM trials ORDER BY id")] == before
        assert all(row[-2:] == (None, 0) for row in con.execute("SELECT * FROM trials"))


def test_a_version_2_file_moves_raced_from_the_metrics_to_its_column(tmp_path):
    db = tmp_path / "v2.db"
    store = _filled(db)
    wid = store.workloads()[0].id
    slow = store.start_trial(wid, None, {"codegen": {"x": 1}}, config_key({"codegen": {"x": 1}}))
    store.finish_trial(slow, TrialStatus.OK, median_s=2.0)
    store.close()
    with sqlite3.connect(db) as con:  # what schema 2 wrote: no column, a metrics entry
        con.execute("ALTER TABLE trials DROP COLUMN raced")
        con.execute("UPDATE trials SET metrics=? WHERE id=?", (json.dumps({"raced": True}), slow))
        con.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    store = Store.open(db)
    assert {t.id: t.raced for t in store.trials(wid)}[slow] is True
    assert sum(t.raced for t in store.trials(wid)) == 1


def test_trial_metrics_round_trip_through_export_and_import(tmp_path):
    store = _filled(tmp_path / "a.db")
    wid = store.workloads()[0].id
    t = store.start_trial(wid, None, {"codegen": {"b": 2}}, '{"codegen":{"b":2}}')
    store.finish_trial(t, "ok", median_s=1e-3, metrics={"peak_bytes": 1024, "flops": 2.0e6})
    document = json.loads(json.dumps(store.export()))
    target = Store.open(tmp_path / "b.db")
    target.import_(document)
    [trial] = [t for t in target.trials(target.workloads()[0].id) if t.config == {"codegen": {"b": 2}}]
    assert trial.metrics == {"peak_bytes": 1024, "flops": 2.0e6}


def test_a_trial_is_never_a_duplicate_of_its_own_row(tmp_path):
    """Two tuners measuring one config share its row: the second to compile it must not find the
    first's finished result on that same row and mark the row a duplicate of itself."""
    store = Store.open(tmp_path / "a.db")
    wid = store.upsert_workload("f" * 64, "p" * 64, "w", {"jaxlib": "x"}, {})
    key = '{"codegen":{"a":1}}'
    mine = store.start_trial(wid, None, {"codegen": {"a": 1}}, key)
    assert store.start_trial(wid, None, {"codegen": {"a": 1}}, key) == mine  # the other tuner: same row
    store.finish_trial(mine, "ok", exe_hash="h", median_s=1e-3)
    assert store.measured_with_hash(wid, "h", mine) is None
    other = store.start_trial(wid, None, {"codegen": {"a": 2}}, '{"codegen":{"a":2}}')
    assert store.measured_with_hash(wid, "h", other).id == mine


# -- import vets what it is given ---------------------------------------------------------------

def _exported(db, config, **kwargs) -> dict:
    from records import adopt

    adopt(db, config, **kwargs)
    store = Store.open(db)
    try:
        return store.export()
    finally:
        store.close()


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["workloads"][0]["env"].update(device_kind="Some Other CPU"), "not the key of its program"),
    (lambda d: d["workloads"][0]["results"][0]["config"].update(codegen={"xla_dump_to": "/tmp/x"}),
     "'xla_dump_to' is not one xtat searches"),
    (lambda d: d["workloads"][0]["results"][0]["config"].update(passes={"copy-insertion": True}), "copy-insertion"),
    (lambda d: d["workloads"][0].update(trials=[]), "no verified ok trial"),
    (lambda d: d["workloads"][0]["results"][0].update(run_settings=None), "relaxes numerics"),
])
def test_import_refuses_records_that_would_not_be_applied(tmp_path, mutate, message):
    document = _exported(tmp_path / "a.db", {"codegen": {"xla_cpu_enable_fast_math": True}},
                         settings={"allow_numerics_change": True, "rtol": 1e-3})
    mutate(document)
    target = tmp_path / "b.db"
    with pytest.raises(UserError, match=message):
        Store.open(target).import_(document)
    assert Store.open(target).export()["workloads"] == []


def test_numerics_opt_in_travels_with_the_record(tmp_path):
    import xtat
    from tiny import mlp, tiny_mlp

    document = _exported(tmp_path / "a.db", {"codegen": {"xla_cpu_enable_fast_math": True}},
                         settings={"allow_numerics_change": True, "rtol": 1e-3})
    target = tmp_path / "b.db"
    Store.open(target).import_(document)
    tuned = xtat.jit(mlp, db=target)
    tuned(*tiny_mlp().args)
    assert [lookup.found.value for lookup in tuned.lookups()] == ["adopted"]


def test_an_imported_result_never_replaces_a_local_decision_unless_asked(tmp_path):
    from records import adopt

    local = tmp_path / "local.db"
    adopt(local, {"codegen": {"xla_cpu_prefer_vector_width": 128}})
    document = _exported(tmp_path / "other.db", {}, adopted=False)  # "not adopted", imported later
    report = Store.open(local).import_(document)
    assert any("not in force" in line and "--prefer-imported" in line for line in report.skipped)
    store = Store.open(local)
    (workload,) = store.workloads()
    assert store.latest_result(workload.id).adopted
    document["workloads"][0]["results"][0]["created_at"] += 60  # a newer copy of the same decision
    Store.open(local).import_(document, prefer_imported=True)
    assert not Store.open(local).latest_result(workload.id).adopted


def test_the_trial_field_list_is_the_schema_and_the_record(tmp_path):
    """TRIAL_FIELDS drives finish_trial, export, import and validation: it must name every trial
    column the schema has (less ids and bookkeeping) and every field of `Trial`."""
    import dataclasses

    from xtat.store.sqlite import TRIAL_FIELDS, Trial

    store = Store.open(tmp_path / "x.db")
    columns = {row[1] for row in store._con.execute("PRAGMA table_info(trials)")}
    listed = {f.name for f in TRIAL_FIELDS}
    assert columns - listed == {"id", "workload_id", "run_id", "finished_at"}
    assert listed - columns == set()
    assert {f.name for f in dataclasses.fields(Trial)} - listed == {"id", "workload_id", "run_id"}
    assert listed - {f.name for f in dataclasses.fields(Trial)} == {"config_key"}  # a property of Trial
