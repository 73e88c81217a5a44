"""The store: refuses files that are not ours without touching them; export/import."""

from __future__ import annotations

import gc
import json
import sqlite3
import time
import warnings

import pytest

from records import ended
from xtat.capture.workload import fingerprint
from xtat.core.errors import StoreError, UserError
from xtat.core.space import config_key
from xtat.core.status import TrialStatus
from xtat.store.records import ProfiledProgram, ResultDetail
from xtat.store.sql import SCHEMA_VERSION, Store

ENV = {"platform": "cpu", "device_kind": "cpu", "jax": "x", "jaxlib": "x"}
FINGERPRINT = fingerprint("p" * 64, ENV)


def _filled(db) -> Store:
    store = Store.open(db)
    wid = store.upsert_workload(FINGERPRINT, "p" * 64, "w", ENV, {})
    run = store.begin_run(wid, {})
    t = store.start_trial(wid, run, {}, "{}")
    store.finish_trial(t, ended("ok", median_s=1e-3, ci=(9e-4, 1.1e-3), samples=[1e-3] * 3))
    t = store.start_trial(wid, run, {"codegen": {"a": 1}}, '{"codegen":{"a":1}}')
    store.finish_trial(t, ended("crash", error="worker killed by SIGSEGV"))
    store.add_result(wid, run, False, {}, 1e-3, 1e-3, None, ResultDetail())
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


def test_export_import_round_trip_and_idempotence(new_store):
    document = _filled(new_store()).export()
    target = Store.open(new_store())
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
def test_malformed_import_writes_nothing(new_store, mutate, message):
    document = _filled(new_store()).export()
    mutate(document)
    target = Store.open(new_store())
    with pytest.raises(UserError, match=message):
        target.import_(document)
    assert target.export()["workloads"] == []


def test_trial_status_is_final_once(new_store):
    store = _filled(new_store())
    wid = store.workloads()[0].id
    before = store.export()
    assert store.start_trial(wid, None, {}, "{}") is None  # finished (by another tuner): not restarted
    assert store.export() == before


def test_a_version_1_file_is_upgraded_in_place_with_its_rows_unchanged(tmp_path):
    db = tmp_path / "v1.db"
    _filled(db).close()
    with sqlite3.connect(db) as con:  # make it what xtat 0.1 with schema 1 wrote
        for column in ("speedup_high", "speedup_low", "speedup", "reference_samples", "node", "lease_until", "owner",
                       "raced"):
            con.execute(f"ALTER TABLE trials DROP COLUMN {column}")
        for column in ("lease_until", "owner"):
            con.execute(f"ALTER TABLE runs DROP COLUMN {column}")
        con.execute("DROP TABLE locks")
        con.execute("DROP TABLE profiled_programs")
        con.execute("DROP TABLE profiles")
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
        assert [row[:-9] for row in con.execute("SELECT * FROM trials ORDER BY id")] == before
        assert all(row[-9:] == (None, 0) + (None,) * 7 for row in con.execute("SELECT * FROM trials"))


def test_a_version_2_file_moves_raced_from_the_metrics_to_its_column(tmp_path):
    db = tmp_path / "v2.db"
    store = _filled(db)
    wid = store.workloads()[0].id
    slow = store.start_trial(wid, None, {"codegen": {"x": 1}}, config_key({"codegen": {"x": 1}}))
    store.finish_trial(slow, ended(TrialStatus.OK, median_s=2.0))
    store.close()
    with sqlite3.connect(db) as con:  # what schema 2 wrote: no column, a metrics entry
        for column in ("speedup_high", "speedup_low", "speedup", "reference_samples", "node", "lease_until", "owner",
                       "raced"):
            con.execute(f"ALTER TABLE trials DROP COLUMN {column}")
        for column in ("lease_until", "owner"):
            con.execute(f"ALTER TABLE runs DROP COLUMN {column}")
        con.execute("DROP TABLE profiled_programs")
        con.execute("DROP TABLE profiles")
        con.execute("UPDATE trials SET metrics=? WHERE id=?", (json.dumps({"raced": True}), slow))
        con.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    store = Store.open(db)
    assert {t.id: t.raced for t in store.trials(wid)}[slow] is True
    assert sum(t.raced for t in store.trials(wid)) == 1


def test_the_standard_library_reader_reads_what_the_store_reads(tmp_path):
    from xtat.store.reader import SqliteReader

    db = tmp_path / "read.db"
    store = _filled(db)
    wid = store.workloads()[0].id
    run = store.begin_run(wid, {"seed": 3})
    trial = store.start_trial(wid, run, {"codegen": {"x": 1}}, config_key({"codegen": {"x": 1}}))
    store.finish_trial(trial, ended(TrialStatus.OK, median_s=2.0, metrics={"flops": 1.0}))
    store.add_result(wid, run, True, {"codegen": {"x": 1}}, 3.0, 2.0, (1.5, 1.2, 1.8), ResultDetail(summary={}))
    store.close()
    store, reader = Store.open(db, read_only=True), SqliteReader.open(db)
    try:
        assert reader is not None and not reader.is_new()
        record = store.workloads()[0]
        assert reader.workload(record.fingerprint) == store.workload(record.fingerprint) == record
        assert reader.workloads_of_program(record.program) == store.workloads_of_program(record.program)
        assert reader.latest_result(wid) == store.latest_result(wid) and reader.latest_result(wid).adopted
        assert reader.trials(wid) == store.trials(wid) and len(reader.trials(wid)) >= 2
        assert reader.run_settings(run) == store.run_settings(run) == {"seed": 3}
        assert reader.workload("0" * 64) is None and reader.run_settings(None) is None
    finally:
        store.close()
        reader.close()
    with sqlite3.connect(db) as con:  # another schema version: left to Store, which migrates or says why
        con.execute("UPDATE meta SET value='6' WHERE key='schema_version'")
    assert SqliteReader.open(db) is None and SqliteReader.open(tmp_path / "missing.db") is None


def test_a_version_6_profile_reads_back_with_no_function_and_no_ranges(tmp_path):
    db = tmp_path / "v6.db"
    store = Store.open(db)
    program = ProfiledProgram("f" * 64, "p" * 64, "step", [], 3, 0.5, 0.1, 0.4, b"exported", None, "seeded",
                              "", "step at train.py:3", [(0.0, 1.0)])
    profile_id = store.add_profile("train", ["python", "train.py"], "/", {}, True, 0, 1.25, [], [program])
    store.close()
    with sqlite3.connect(db) as con:  # what schema 6 wrote: neither column
        for column in ("function", "ranges"):
            con.execute(f"ALTER TABLE profiled_programs DROP COLUMN {column}")
        con.execute("UPDATE meta SET value='6' WHERE key='schema_version'")
    store = Store.open(db)
    try:
        [read] = store.profiled_programs(profile_id)
        assert read == ProfiledProgram(*[getattr(program, f) for f in ("fingerprint", "program", "name", "avals",
                                                                        "calls", "run_s", "compile_s", "share",
                                                                        "exported", "inputs", "inputs_note",
                                                                        "not_tunable")])
        assert read.function == "" and read.ranges is None  # a function of its own, inputs seeded as before
    finally:
        store.close()


def test_trial_metrics_round_trip_through_export_and_import(new_store):
    store = _filled(new_store())
    wid = store.workloads()[0].id
    t = store.start_trial(wid, None, {"codegen": {"b": 2}}, '{"codegen":{"b":2}}')
    store.finish_trial(t, ended("ok", median_s=1e-3, metrics={"peak_bytes": 1024, "flops": 2.0e6}))
    document = json.loads(json.dumps(store.export()))
    target = Store.open(new_store())
    target.import_(document)
    [trial] = [t for t in target.trials(target.workloads()[0].id) if t.config == {"codegen": {"b": 2}}]
    assert trial.metrics == {"peak_bytes": 1024, "flops": 2.0e6}


def test_a_trial_is_never_a_duplicate_of_its_own_row(new_store):
    """Two tuners measuring one config share its row: the second to compile it must not find the
    first's finished result on that same row and mark the row a duplicate of itself."""
    store = Store.open(new_store())
    wid = store.upsert_workload("f" * 64, "p" * 64, "w", {"jaxlib": "x"}, {})
    key = '{"codegen":{"a":1}}'
    mine = store.start_trial(wid, None, {"codegen": {"a": 1}}, key, owner="first", lease_s=0.0)
    assert store.start_trial(wid, None, {"codegen": {"a": 1}}, key, owner="second") == mine  # lease ran out
    store.finish_trial(mine, ended("ok", exe_hash="h", median_s=1e-3))
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
def test_import_refuses_records_that_would_not_be_applied(new_store, mutate, message):
    document = _exported(new_store(), {"codegen": {"xla_cpu_enable_fast_math": True}},
                         settings={"allow_numerics_change": True, "rtol": 1e-3})
    mutate(document)
    target = new_store()
    with pytest.raises(UserError, match=message):
        Store.open(target).import_(document)
    assert Store.open(target).export()["workloads"] == []


def test_numerics_opt_in_travels_with_the_record(new_store):
    import xtat
    from tiny import mlp, tiny_mlp

    document = _exported(new_store(), {"codegen": {"xla_cpu_enable_fast_math": True}},
                         settings={"allow_numerics_change": True, "rtol": 1e-3})
    target = new_store()
    Store.open(target).import_(document)
    tuned = xtat.jit(mlp, db=target)
    tuned(*tiny_mlp().args)
    assert [lookup.found.value for lookup in tuned.lookups()] == ["adopted"]


def test_an_imported_result_never_replaces_a_local_decision_unless_asked(new_store):
    from records import adopt

    local = new_store()
    adopt(local, {"codegen": {"xla_cpu_prefer_vector_width": 128}})
    document = _exported(new_store(), {}, adopted=False)  # "not adopted", imported later
    report = Store.open(local).import_(document)
    assert any("not in force" in line and "--prefer-imported" in line for line in report.skipped)
    store = Store.open(local)
    (workload,) = store.workloads()
    assert store.latest_result(workload.id).adopted
    document["workloads"][0]["results"][0]["created_at"] += 60  # a newer copy of the same decision
    Store.open(local).import_(document, prefer_imported=True)
    assert not Store.open(local).latest_result(workload.id).adopted


def test_the_trial_field_list_is_the_schema_and_the_record(new_store):
    """TRIAL_FIELDS drives finish_trial, export, import and validation: it must name every trial
    column the schema has (less ids and bookkeeping) and every field of `Trial`."""
    import dataclasses

    import sqlalchemy

    from xtat.store.records import BOOKKEEPING, TRIAL_FIELDS, Trial

    store = Store.open(new_store())
    columns = {column["name"] for column in sqlalchemy.inspect(store.engine).get_columns("trials")}
    listed = {f.name for f in TRIAL_FIELDS}
    assert columns - listed == BOOKKEEPING
    assert listed - columns == set()
    # less what the metrics column keeps beside the compile-time facts (`records.packed_metrics`)
    assert {f.name for f in dataclasses.fields(Trial)} - listed == {"id", "workload_id", "run_id", "mismatches",
                                                                     "lost_nodes"}
    assert listed - {f.name for f in dataclasses.fields(Trial)} == {"config_key"}  # a property of Trial


# -- claims: trials and locks held under leases (tuners sharing one study) ------------------------

def test_a_claimed_trial_is_not_measured_twice_until_its_lease_runs_out(new_store):
    store = Store.open(new_store())
    wid = store.upsert_workload("f" * 64, "p" * 64, "w", {"jaxlib": "x"}, {})
    key = config_key({"codegen": {"a": 1}})
    mine = store.start_trial(wid, None, {"codegen": {"a": 1}}, key, owner="host-a:1:x", lease_s=60)
    assert store.start_trial(wid, None, {"codegen": {"a": 1}}, key, owner="host-b:2:y") is None  # alive
    assert store.start_trial(wid, None, {"codegen": {"a": 1}}, key, owner="host-a:1:x") == mine  # its own
    assert [t.id for t in store.claimed_elsewhere(wid, "host-b:2:y")] == [mine]
    assert store.claimed_elsewhere(wid, "host-a:1:x") == []
    assert store.renew("host-a:1:x", -1.0) == 1  # the heartbeat stops: the lease is over
    assert store.claimed_elsewhere(wid, "host-b:2:y") == []
    assert store.start_trial(wid, None, {"codegen": {"a": 1}}, key, owner="host-b:2:y") == mine  # re-claimed
    store.finish_trial(mine, ended(TrialStatus.OK, median_s=1e-3))
    assert store.start_trial(wid, None, {"codegen": {"a": 1}}, key, owner="host-a:1:x") is None  # finished
    assert store.renew("host-b:2:y", 60) == 0  # a finished trial holds no claim


def test_a_dead_tuners_claim_on_this_host_is_re_claimed_at_once(new_store):
    import socket
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    owner = f"{socket.gethostname()}:{int(dead.stdout)}:x"  # a process that has exited
    store = Store.open(new_store())
    wid = store.upsert_workload("f" * 64, "p" * 64, "w", {"jaxlib": "x"}, {})
    first = store.start_trial(wid, None, {}, "{}", owner=owner, lease_s=3600)
    assert store.start_trial(wid, None, {}, "{}", owner="other:1:y") == first
    assert store.try_lock("decide:1", owner, 3600)
    assert store.try_lock("decide:1", "other:1:y", 60)  # the dead holder's lock is taken over too


def test_a_named_lock_has_one_holder_at_a_time(new_store):
    store = Store.open(new_store())
    assert store.try_lock("decide:1", "a:1:x", 60)
    assert store.try_lock("decide:1", "a:1:x", 60)  # held already: taken again
    assert not store.try_lock("decide:1", "b:2:y", 60)
    assert store.try_lock("decide:2", "b:2:y", 60)  # another name
    store.unlock("decide:1", "b:2:y")  # not its holder: nothing happens
    assert not store.try_lock("decide:1", "b:2:y", 60)
    store.unlock("decide:1", "a:1:x")
    assert store.try_lock("decide:1", "b:2:y", 60)
    assert store.renew("b:2:y", -1.0) == 2
    assert store.try_lock("decide:2", "a:1:x", 60)  # the lease ran out


def test_a_server_that_does_not_answer_is_a_clear_error(tmp_path):
    with pytest.raises(StoreError, match=r"cannot open postgresql://xtat:\*\*\*@127.0.0.1:9/nobody .*server runs"):
        Store.open("postgresql://xtat:secret@127.0.0.1:9/nobody")
    with pytest.raises(StoreError, match="unknown store location"):
        Store.open("mysql://host/db")


def test_a_postgres_database_that_is_not_ours_is_refused_unchanged(postgres_database):
    import sqlalchemy

    url = postgres_database()
    engine = sqlalchemy.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as con:
        con.exec_driver_sql("CREATE TABLE notes (x TEXT)")
    with pytest.raises(StoreError, match="not xtat's"):
        Store.open(url)
    with engine.connect() as con:
        assert sqlalchemy.inspect(con).get_table_names() == ["notes"]
    engine.dispose()


def _sessions(server: str, url: str) -> int:
    """The server's sessions on URL's database, once the ones just closed have ended (a backend
    ends a moment after its client leaves)."""
    import psycopg

    name = url.rsplit("/", 1)[1]
    deadline = time.monotonic() + 10
    with psycopg.connect(server, autocommit=True) as con:
        while True:
            row = con.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (name,)).fetchone()
            count = row[0] if row else 0
            if count == 0 or time.monotonic() > deadline:
                return count
            time.sleep(0.05)


def test_a_store_refused_or_dropped_unclosed_leaves_no_connection_open(postgres_server, postgres_database):
    """Connections a caller never closed are closed, not left to the garbage collector: psycopg warns
    of each one it collects open, in whatever code runs at that moment (a user's jax.jit call)."""
    url = postgres_database()
    store = Store.open(url)
    store.upsert_workload(FINGERPRINT, "p" * 64, "w", ENV, {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del store
        gc.collect()
    assert [str(w.message) for w in caught] == []
    assert _sessions(postgres_server, url) == 0

    foreign = postgres_database()
    import psycopg

    with psycopg.connect(foreign, autocommit=True) as con:
        con.execute("CREATE TABLE notes (x TEXT)")
    with pytest.raises(StoreError, match="not xtat's") as refused:
        Store.open(foreign)
    # The caller still holds the error, and with it the refused store: its sessions have ended anyway.
    assert _sessions(postgres_server, foreign) == 0
    del refused


def test_claims_and_locks_taken_at_the_same_moment_have_one_winner(new_store):
    """Many tuners claiming one config, or one lock, at once: exactly one gets it (transactions
    that read, then write, are serialized on both backends)."""
    from concurrent.futures import ThreadPoolExecutor

    location = new_store()
    store = Store.open(location)
    wid = store.upsert_workload("f" * 64, "p" * 64, "w", {"jaxlib": "x"}, {})
    stores = [Store.open(location) for _ in range(8)]
    with ThreadPoolExecutor(8) as pool:
        for round in range(5):
            config = {"codegen": {"a": round}}

            def claim(i: int, config: dict = config) -> int | None:
                return stores[i].start_trial(wid, None, config, config_key(config), owner=f"h{i}:{i}:x")

            def lock(i: int, name: str = f"decide:{round}") -> bool:
                return stores[i].try_lock(name, f"h{i}:{i}:x", 60)

            claims = list(pool.map(claim, range(8)))
            assert sum(c is not None for c in claims) == 1, claims
            locks = list(pool.map(lock, range(8)))
            assert sum(locks) == 1, locks
    for s in stores:
        s.close()
