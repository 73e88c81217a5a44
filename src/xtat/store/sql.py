"""The results store on SQLAlchemy Core: one SQLite file on one machine, or a PostgreSQL study
shared by many tuners on many machines. Every attempt is recorded, failures included.

Where: a path or `sqlite:///PATH` (SQLite, WAL mode, shared by the tuners and `xtat.jit` readers
of one machine), or `postgresql://USER:PASSWORD@HOST/DB` (psycopg). A location that is not ours,
is corrupt, or was written by a newer schema is refused before anything is written to it.

Trials are claimed: a tuner that starts one owns it under a lease that its heartbeat renews
(`renew`); another tuner never measures a claimed trial while its lease holds, and re-claims it
once the lease has run out (its tuner was killed). Records are JSON columns; nothing is pickled.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sqlite3
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from xtat.core.errors import StoreError
from xtat.core.status import RunStatus, TrialStatus
from xtat.core.test_hooks import hook
from xtat.store import schema as s
from xtat.store.location import default_location, owner_id, redacted, sqlite_path
from xtat.store.records import (
    TRIAL_FIELD,
    TRIAL_FIELDS,
    ImportReport,
    ProfiledProgram,
    ProfileRecord,
    Rejection,
    Result,
    ResultDetail,
    Timing,
    Trial,
    TrialOutcome,
    WorkloadRecord,
    result_json,
    trial_json,
)
from xtat.store.rows import in_force, result_record, trial_record, workload_record
from xtat.store.rows import run_settings as settings_of

SCHEMA_VERSION = s.SCHEMA_VERSION


# Advisory lock keys on PostgreSQL (`Store._one_at_a_time`), one per kind of serialized write.
_ADVISORY = {"schema": 7_272_740, "claims": 7_272_741, "locks": 7_272_742}


def _column_value(name: str, value: object) -> object:
    """A trial field as its column stores it."""
    if TRIAL_FIELD[name].stored_as_json:
        return None if value is None else json.dumps(value)
    return value


def _owner_is_dead(owner: str | None) -> bool:
    """A claim by a process of this host that no longer runs holds nothing (a killed tuner)."""
    host, _, rest = (owner or "").partition(":")
    if host != socket.gethostname():
        return False
    try:
        os.kill(int(rest.partition(":")[0]), 0)
    except ProcessLookupError:
        return True
    except (OSError, ValueError):
        return False
    return False


# -- SQLite files: looked at before they are opened -------------------------------------------

def _inspect_sqlite(path: Path) -> None:
    """Refuse, without writing, a file that is not an xtat database of a known schema."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb") as handle:
        if handle.read(16) != b"SQLite format 3\x00":
            raise StoreError(f"{path} is not an SQLite database; pass --db with a new or xtat file")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            meta = dict(con.execute("SELECT key, value FROM meta")) if "meta" in tables else None
            check = con.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is corrupt or unreadable ({exc}); restore it or use another --db") from exc
    if check != "ok":
        raise StoreError(f"{path} fails SQLite's integrity check ({check}); restore it or use another --db")
    if tables:
        _check_meta(str(path), meta)


def _check_meta(where: str, meta: dict | None) -> None:
    if meta is None:
        raise StoreError(f"{where} is a database but not xtat's (no meta table); use another --db")
    if meta.get("application") != s.APPLICATION:
        raise StoreError(f"{where} is not an xtat database; use another --db")
    version = int(meta.get("schema_version", "0"))
    if version > SCHEMA_VERSION:
        raise StoreError(f"{where} has schema version {version}, newer than this xtat's {SCHEMA_VERSION}; "
                         "upgrade xtat")


def _check_server_meta(conn: sa.Connection, where: str) -> None:
    """Refuse a server database that has tables but is not an xtat store of a known schema."""
    names = sa.inspect(conn).get_table_names()
    if names:
        meta = {row.key: row.value for row in conn.execute(sa.select(s.meta))} if "meta" in names else None
        _check_meta(where, meta)


def _sqlite_engine(path: Path, read_only: bool) -> sa.Engine:
    if read_only:
        if not path.exists():
            raise StoreError(f"no database at {path}")
        url = f"sqlite:///file:{path}?mode=ro&uri=true"
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():  # tuning records are the owner's: created readable by the owner only
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        url = f"sqlite:///{path}"
    engine = sa.create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # transactions are begun below, not by the driver
        if not read_only:
            dbapi_connection.execute("PRAGMA journal_mode=WAL")
        dbapi_connection.execute("PRAGMA busy_timeout=30000")
        dbapi_connection.execute("PRAGMA foreign_keys=ON")
        if hook("XTAT_TEST_MAX_PAGES"):  # TEST-ONLY: simulate a full disk
            dbapi_connection.execute(f"PRAGMA max_page_count={int(hook('XTAT_TEST_MAX_PAGES'))}")

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        # A write takes the file's write lock at once, so two writers queue instead of deadlocking.
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("xtat_write") else "BEGIN")

    return engine


class Store:
    """The SQLAlchemy implementation of `store.base.Storage`, for SQLite and PostgreSQL."""

    def __init__(self, location: str | Path, engine: sa.Engine, read_only: bool):
        self.location = location
        self.where = str(location) if isinstance(location, Path) else redacted(str(location))
        self.engine = engine
        self.read_only = read_only
        self.is_server = engine.dialect.name != "sqlite"
        # A store its caller drops unclosed still closes its connections, as a dropped file does:
        # psycopg warns of every connection collected open.
        weakref.finalize(self, engine.dispose)

    @classmethod
    def open(cls, location: str | Path | None = None, read_only: bool = False) -> Store:
        location = default_location() if location is None else location
        file = sqlite_path(location)
        where = str(file) if file is not None else redacted(str(location))
        engine: sa.Engine | None = None
        try:
            if file is not None:
                _inspect_sqlite(file)
                engine = _sqlite_engine(file, read_only)
                location = file
            else:
                url = sa.make_url(str(location)).set(drivername="postgresql+psycopg")
                engine = sa.create_engine(url, pool_pre_ping=True, pool_size=20, max_overflow=20)
            store = cls(location, engine, read_only)
            engine.connect().close()  # reachable, and the credentials hold
            if not read_only:
                store._create_or_migrate()
            elif store.is_server:
                with engine.connect() as conn:
                    _check_server_meta(conn, store.where)
            return store
        except BaseException as exc:
            if engine is not None:
                engine.dispose()  # a store refused is not left holding connections
            if not isinstance(exc, sa.exc.SQLAlchemyError):
                raise
            what = "reading" if read_only else "writing"
            raise StoreError(f"cannot open {where} for {what} ({str(exc).splitlines()[0]}); check the location, "
                             "that the server runs, and the permissions") from exc

    def _create_or_migrate(self) -> None:
        with self._write() as conn:
            if self.is_server:  # one tuner at a time creates or migrates a server's schema
                self._one_at_a_time(conn, "schema")
                _check_server_meta(conn, self.where)
            version = self._schema_version(conn)
            for target in range(version + 1, SCHEMA_VERSION + 1) if version else ():
                s.MIGRATIONS[target](conn)
            s.metadata.create_all(conn)
            self._insert_ignore(conn, s.meta, {"key": "application", "value": s.APPLICATION})
            self._upsert(conn, s.meta, {"key": "schema_version", "value": str(SCHEMA_VERSION)}, "key")

    @staticmethod
    def _schema_version(conn: sa.Connection) -> int:
        """The store's schema version; 0 for a new, empty one."""
        if not sa.inspect(conn).has_table("meta"):
            return 0
        value = conn.execute(sa.select(s.meta.c.value).where(s.meta.c.key == "schema_version")).scalar()
        return int(value) if value else 0

    def is_new(self) -> bool:
        """No tables yet: a tuner has just created the file and not yet committed its schema."""
        with self._read() as conn:
            return self._schema_version(conn) == 0

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions -------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[sa.Connection]:
        """One transaction; rolled back whole on any error (disk full, read-only, server gone)."""
        try:
            with self.engine.connect().execution_options(xtat_write=True) as conn, conn.begin():
                yield conn
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"write to {self.where} failed and was rolled back: {str(exc).splitlines()[0]}") from exc

    @contextmanager
    def _read(self) -> Iterator[sa.Connection]:
        try:
            with self.engine.connect() as conn:
                yield conn
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"read from {self.where} failed: {str(exc).splitlines()[0]}") from exc

    def _rows(self, statement: sa.Executable) -> list[sa.Row]:
        with self._read() as conn:
            return list(conn.execute(statement))

    @staticmethod
    def _one_at_a_time(conn: sa.Connection, what: str) -> None:
        """Serialize this transaction with every other of `what` (claims, locks): their reads decide
        their writes. SQLite's write lock (BEGIN IMMEDIATE) already serializes every write; on
        PostgreSQL, whose transactions run concurrently, an advisory lock held until commit does."""
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _ADVISORY[what]})

    @staticmethod
    def _dialect_insert(conn: sa.Connection, table: sa.Table) -> Any:
        """INSERT with the dialect's ON CONFLICT clauses (imported here: `xtat.jit` readers need neither)."""
        if conn.dialect.name == "postgresql":
            from sqlalchemy.dialects import postgresql

            return postgresql.insert(table)
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(table)

    def _insert_ignore(self, conn: sa.Connection, table: sa.Table, row: dict) -> int:
        """Insert the row unless one with the same unique key is there; 1 if it was inserted, else 0."""
        statement = self._dialect_insert(conn, table).values(**row).on_conflict_do_nothing()
        return conn.execute(statement, execution_options={"preserve_rowcount": True}).rowcount

    def _upsert(self, conn: sa.Connection, table: sa.Table, row: dict, key: str) -> None:
        insert = self._dialect_insert(conn, table).values(**row)
        conn.execute(insert.on_conflict_do_update(index_elements=[key], set_={k: v for k, v in row.items()
                                                                                if k != key}))

    # -- machine facts (e.g. roofline peaks), keyed by what they describe ----------

    def machine_fact(self, key: str) -> dict | None:
        rows = self._rows(sa.select(s.machine.c.value).where(s.machine.c.key == key))
        return json.loads(rows[0][0]) if rows else None

    def set_machine_fact(self, key: str, value: dict) -> None:
        with self._write() as conn:
            self._upsert(conn, s.machine, {"key": key, "value": json.dumps(value), "measured_at": time.time()}, "key")

    # -- workloads ------------------------------------------------------------

    def upsert_workload(self, fingerprint: str, program: str, name: str, env: dict, info: dict) -> int:
        with self._write() as conn:
            self._insert_ignore(conn, s.workloads, {
                "fingerprint": fingerprint, "program": program, "name": name, "env": json.dumps(env),
                "info": json.dumps(info), "created_at": time.time()})
            return int(conn.execute(sa.select(s.workloads.c.id).where(s.workloads.c.fingerprint == fingerprint))
                       .scalar_one())

    def workloads(self) -> list[WorkloadRecord]:
        return [self._workload(row) for row in self._rows(sa.select(s.workloads).order_by(s.workloads.c.id))]

    def workload(self, fingerprint: str) -> WorkloadRecord | None:
        rows = self._rows(sa.select(s.workloads).where(s.workloads.c.fingerprint == fingerprint))
        return self._workload(rows[0]) if rows else None

    def workloads_of_program(self, program: str) -> list[WorkloadRecord]:
        rows = self._rows(sa.select(s.workloads).where(s.workloads.c.program == program).order_by(s.workloads.c.id))
        return [self._workload(row) for row in rows]

    def find_workload(self, name_or_fingerprint: str) -> WorkloadRecord:
        """By fingerprint (or a unique prefix of it), else by name (the newest)."""
        w = s.workloads.c
        rows = self._rows(sa.select(s.workloads).where(
            w.fingerprint.startswith(name_or_fingerprint, autoescape=True) | (w.name == name_or_fingerprint))
            .order_by(w.id.desc()))
        if not rows:
            raise StoreError(f"no workload named {name_or_fingerprint!r} in {self.where}; `xtat show` lists them")
        return self._workload(rows[0])

    @staticmethod
    def _workload(row: sa.Row) -> WorkloadRecord:
        return workload_record(row._mapping)

    # -- profiles (`xtat profile`) -----------------------------------------------

    def add_profile(self, name: str, command: list[str], cwd: str, env: dict, complete: bool, exit_code: int,
                    wall_s: float, notes: list[str], programs: list[ProfiledProgram]) -> int:
        """One profiled run and its programs, in one transaction."""
        with self._write() as conn:
            profile_id = int(conn.execute(sa.insert(s.profiles).values(
                name=name, command=json.dumps(command), cwd=cwd, env=json.dumps(env), complete=complete,
                exit_code=exit_code,
                wall_s=wall_s, notes=json.dumps(notes), created_at=time.time())
                .returning(s.profiles.c.id)).scalar_one())
            for p in programs:
                conn.execute(sa.insert(s.profiled_programs).values(
                    profile_id=profile_id, fingerprint=p.fingerprint, program=p.program, name=p.name,
                    avals=json.dumps(p.avals), calls=p.calls, run_s=p.run_s, compile_s=p.compile_s, share=p.share,
                    exported=p.exported, inputs=p.inputs, inputs_note=p.inputs_note, not_tunable=p.not_tunable,
                    function=p.function, ranges=None if p.ranges is None else json.dumps(p.ranges)))
            return profile_id

    def latest_profile(self, name: str) -> ProfileRecord | None:
        rows = self._rows(sa.select(s.profiles).where(s.profiles.c.name == name).order_by(s.profiles.c.id.desc())
                          .limit(1))
        if not rows:
            return None
        m = rows[0]._mapping
        return ProfileRecord(m["id"], m["name"], json.loads(m["command"]), m["cwd"], json.loads(m["env"]),
                             bool(m["complete"]),
                             int(m["exit_code"]), float(m["wall_s"]), json.loads(m["notes"]), float(m["created_at"]))

    def profiled_programs(self, profile_id: int) -> list[ProfiledProgram]:
        """A profile's programs, largest share first."""
        rows = self._rows(sa.select(s.profiled_programs).where(s.profiled_programs.c.profile_id == profile_id)
                          .order_by(s.profiled_programs.c.share.desc(), s.profiled_programs.c.id))
        return [ProfiledProgram(m["fingerprint"], m["program"], m["name"], json.loads(m["avals"]), int(m["calls"]),
                                float(m["run_s"]), float(m["compile_s"]), float(m["share"]), m["exported"],
                                m["inputs"], m["inputs_note"], m["not_tunable"], m["function"] or "",
                                None if m["ranges"] is None else json.loads(m["ranges"]))
                for m in (row._mapping for row in rows)]

    # -- runs -----------------------------------------------------------------

    def begin_run(self, workload_id: int, settings: dict, owner: str | None = None, lease_s: float = 60.0) -> int:
        """A run starts `searching`, held by `owner` under a lease (renewed by `renew`)."""
        with self._write() as conn:
            return int(conn.execute(sa.insert(s.runs).values(
                workload_id=workload_id, started_at=time.time(), settings=json.dumps(settings),
                status=RunStatus.SEARCHING.value, owner=owner, lease_until=time.time() + lease_s)
                .returning(s.runs.c.id)).scalar_one())

    def set_run_status(self, run_id: int, status: RunStatus) -> None:
        with self._write() as conn:
            conn.execute(sa.update(s.runs).where(s.runs.c.id == run_id).values(status=RunStatus(status).value))

    def run_settings(self, run_id: int | None) -> dict | None:
        """The settings a run recorded (None for an unknown run, or a result that came without one)."""
        if run_id is None:
            return None
        found = self._rows(sa.select(s.runs.c.settings).where(s.runs.c.id == run_id))
        return settings_of(found[0][0]) if found else None

    def finish_run(self, run_id: int, status: RunStatus = RunStatus.FINISHED) -> None:
        with self._write() as conn:
            conn.execute(sa.update(s.runs).where(s.runs.c.id == run_id)
                         .values(finished_at=time.time(), status=RunStatus(status).value, lease_until=None))

    # -- trials ---------------------------------------------------------------

    def trial(self, workload_id: int, key: str) -> Trial | None:
        t = s.trials.c
        rows = self._rows(sa.select(s.trials).where(t.workload_id == workload_id, t.config_key == key))
        return self._trial(rows[0]) if rows else None

    def trials(self, workload_id: int) -> list[Trial]:
        rows = self._rows(sa.select(s.trials).where(s.trials.c.workload_id == workload_id).order_by(s.trials.c.id))
        return [self._trial(row) for row in rows]

    def start_trial(self, workload_id: int, run_id: int | None, config: dict, key: str,
                    owner: str | None = None, lease_s: float = 60.0) -> int | None:
        """Claim a config for `owner` until `lease_s` from now (renewed by `renew`); its row id.

        None when the config is not to be measured by this caller: finished already, or claimed by
        another owner whose lease still holds. A row left `running` whose lease ran out, or whose
        owner on this host is dead (a killed tuner), is re-claimed."""
        owner = owner or owner_id()
        now = time.time()
        t = s.trials.c
        with self._write() as conn:
            self._one_at_a_time(conn, "claims")
            row = conn.execute(sa.select(t.id, t.status, t.owner, t.lease_until)
                               .where(t.workload_id == workload_id, t.config_key == key)).first()
            if row is None:
                return int(conn.execute(sa.insert(s.trials).values(
                    workload_id=workload_id, run_id=run_id, config_key=key, config=json.dumps(config),
                    status=TrialStatus.RUNNING.value, created_at=now, owner=owner, lease_until=now + lease_s)
                    .returning(t.id)).scalar_one())
            if row.status != TrialStatus.RUNNING:
                return None
            expired = row.lease_until is None or row.lease_until < now or _owner_is_dead(row.owner)
            if row.owner != owner and not expired:
                return None
            conn.execute(sa.update(s.trials).where(t.id == row.id)
                         .values(run_id=run_id, owner=owner, lease_until=now + lease_s))
            return int(row.id)

    def renew(self, owner: str, lease_s: float) -> int:
        """The heartbeat: extend every claim (trials and locks) `owner` holds; how many it holds."""
        until = time.time() + lease_s
        with self._write() as conn:
            held = conn.execute(sa.update(s.trials).where(s.trials.c.owner == owner,
                                                          s.trials.c.status == TrialStatus.RUNNING.value)
                                .values(lease_until=until)).rowcount
            held += conn.execute(sa.update(s.locks).where(s.locks.c.owner == owner).values(lease_until=until)).rowcount
            conn.execute(sa.update(s.runs).where(s.runs.c.owner == owner, s.runs.c.lease_until.is_not(None))
                         .values(lease_until=until))
        return held

    def claimed_elsewhere(self, workload_id: int, owner: str) -> list[Trial]:
        """Running trials of the workload that another owner's live lease holds."""
        t = s.trials.c
        rows = self._rows(sa.select(s.trials).where(
            t.workload_id == workload_id, t.status == TrialStatus.RUNNING.value, t.owner != owner,
            t.lease_until >= time.time()))
        return [self._trial(row) for row in rows if not _owner_is_dead(row.owner)]

    def try_lock(self, name: str, owner: str, lease_s: float) -> bool:
        """Take the named lock for `owner` (renewed by `renew`) unless another owner's lease holds it."""
        now = time.time()
        with self._write() as conn:
            self._one_at_a_time(conn, "locks")
            conn.execute(sa.delete(s.locks).where(s.locks.c.name == name, s.locks.c.lease_until < now))
            row = conn.execute(sa.select(s.locks).where(s.locks.c.name == name)).first()
            if row is not None and row.owner != owner and not _owner_is_dead(row.owner):
                return False
            self._upsert(conn, s.locks, {"name": name, "owner": owner, "lease_until": now + lease_s}, "name")
            return True

    def unlock(self, name: str, owner: str) -> None:
        with self._write() as conn:
            conn.execute(sa.delete(s.locks).where(s.locks.c.name == name, s.locks.c.owner == owner))

    def finish_trial(self, trial_id: int, outcome: TrialOutcome) -> None:
        values = {name: _column_value(name, value) for name, value in outcome.columns().items()}
        with self._write() as conn:
            conn.execute(sa.update(s.trials).where(s.trials.c.id == trial_id).values(
                finished_at=time.time(), lease_until=None, **values))

    def retime_trial(self, trial_id: int, timing: Timing, search_pairs: int) -> None:
        values = {name: _column_value(name, value) for name, value in timing.columns().items()}
        with self._write() as conn:
            stored = conn.execute(sa.select(s.trials.c.metrics).where(s.trials.c.id == trial_id)).scalar()
            metrics = json.loads(stored) if stored else {}
            values["metrics"] = _column_value("metrics", {**(metrics if isinstance(metrics, dict) else {}),
                                                          "search_pairs": search_pairs})
            conn.execute(sa.update(s.trials).where(s.trials.c.id == trial_id).values(**values))

    def demote_trial(self, trial_id: int, error: str, status: TrialStatus = TrialStatus.WRONG_RESULT) -> None:
        """An adopted-candidate check failed later: it may never be chosen again."""
        with self._write() as conn:
            conn.execute(sa.update(s.trials).where(s.trials.c.id == trial_id)
                         .values(status=status.value, error=error))

    def measured_with_hash(self, workload_id: int, exe_hash: str, asking_id: int) -> Trial | None:
        """The earliest measured trial of this executable other than the asking trial's own row (which a
        second tuner measuring the same config may already have finished)."""
        t = s.trials.c
        rows = self._rows(sa.select(s.trials).where(
            t.workload_id == workload_id, t.exe_hash == exe_hash, t.same_as.is_(None),
            t.status.not_in([TrialStatus.RUNNING.value, TrialStatus.DUPLICATE.value]), t.id != asking_id)
            .order_by(t.id).limit(1))
        return self._trial(rows[0]) if rows else None

    @staticmethod
    def _trial(row: sa.Row) -> Trial:
        return trial_record(row._mapping)

    # -- results --------------------------------------------------------------

    def add_result(self, workload_id: int, run_id: int | None, adopted: bool, config: dict,
                   default_s: float | None, best_s: float | None, speedup: tuple[float, float, float] | None,
                   detail: ResultDetail) -> int:
        with self._write() as conn:
            return self._insert_result(conn, workload_id, run_id, adopted, config, default_s, best_s, speedup,
                                       detail, time.time())

    @staticmethod
    def _insert_result(conn: sa.Connection, workload_id: int, run_id: int | None, adopted: bool, config: dict,
                       default_s: float | None, best_s: float | None,
                       speedup: tuple[float | None, float | None, float | None] | None, detail: ResultDetail,
                       created_at: float) -> int:
        median, low, high = speedup if speedup else (None, None, None)
        return int(conn.execute(sa.insert(s.results).values(
            workload_id=workload_id, run_id=run_id, adopted=adopted, config=json.dumps(config),
            default_s=default_s, best_s=best_s, speedup=median, speedup_low=low, speedup_high=high,
            detail=json.dumps(detail.to_json()), created_at=created_at).returning(s.results.c.id)).scalar_one())

    def mark_rejected(self, result_id: int, reason: str, env: dict) -> None:
        """Note on a result that this XLA refused to apply it (kept, never deleted)."""
        r = s.results.c
        with self._write() as conn:
            text = conn.execute(sa.select(r.detail).where(r.id == result_id)).scalar()
            if text is None:
                return
            detail = ResultDetail.from_json(json.loads(text))
            rejected = (*detail.rejected_at_apply, Rejection(reason[:500], env, time.time()))
            conn.execute(sa.update(s.results).where(r.id == result_id).values(
                detail=json.dumps(dataclasses.replace(detail, rejected_at_apply=rejected).to_json())))

    def latest_result(self, workload_id: int) -> Result | None:
        """The decision in force (`rows.in_force`)."""
        return in_force(self.results(workload_id))

    def results(self, workload_id: int) -> list[Result]:
        rows = self._rows(sa.select(s.results).where(s.results.c.workload_id == workload_id).order_by(s.results.c.id))
        return [self._result(row) for row in rows]

    @staticmethod
    def _result(row: sa.Row) -> Result:
        return result_record(row._mapping)

    # -- export / import --------------------------------------------------------

    def export(self) -> dict:
        workloads: list[dict] = []
        out = {"xtat_export": 1, "schema_version": SCHEMA_VERSION, "workloads": workloads}
        for w in self.workloads():
            workloads.append({
                "fingerprint": w.fingerprint, "program": w.program, "name": w.name, "env": w.env, "info": w.info,
                "trials": [trial_json(t) for t in self.trials(w.id)],
                "results": [{**result_json(r), "run_settings": self.run_settings(r.run_id)}
                            for r in self.results(w.id)],
            })
        return out

    def import_(self, document: dict, prefer_imported: bool = False) -> ImportReport:
        """Insert what is new; validated and vetted whole before the single write transaction.

        Imported results never replace a decision made here unless `prefer_imported`."""
        from xtat.store.exchange import validate_export

        workloads = validate_export(document)
        counts = {"workloads": 0, "trials": 0, "results": 0}
        skipped: list[str] = []
        exported = [f.name for f in TRIAL_FIELDS if f.exported]
        with self._write() as conn:
            for w in workloads:
                counts["workloads"] += self._insert_ignore(conn, s.workloads, {
                    "fingerprint": w["fingerprint"], "program": w["program"], "name": w["name"],
                    "env": json.dumps(w["env"]), "info": json.dumps(w["info"]), "created_at": time.time()})
                workload_id = conn.execute(sa.select(s.workloads.c.id)
                                           .where(s.workloads.c.fingerprint == w["fingerprint"])).scalar_one()
                present = 0
                for t in w["trials"]:
                    # Exports of schema 2 kept `raced` among the metrics.
                    t = {"raced": bool((t.get("metrics") or {}).get("raced")), **t}
                    added = self._insert_ignore(conn, s.trials, {
                        "workload_id": workload_id, "finished_at": time.time(),
                        **{name: _column_value(name, t.get(name)) for name in exported}})
                    counts["trials"] += added
                    present += 1 - added
                if present:
                    skipped.append(f"{w['name']}: {present} trial(s) already recorded here, kept as they are")
                results = [self._result(row) for row in conn.execute(
                    sa.select(s.results).where(s.results.c.workload_id == workload_id))]
                local = sum(not r.imported for r in results)
                known = {r.created_at for r in results}
                recorded = sum(r["created_at"] in known for r in w["results"])
                if recorded:
                    skipped.append(f"{w['name']}: {recorded} result(s) already recorded here")
                if local and not prefer_imported and len(w["results"]) > recorded:
                    skipped.append(f"{w['name']}: imported result(s) added but not in force: this store's own "
                                   "decision stands (--prefer-imported lets them replace it)")
                for r in w["results"]:
                    if r["created_at"] in known:
                        continue
                    run_id = None
                    if r.get("run_settings") is not None:  # the recording run's opt-ins travel with it
                        run_id = conn.execute(sa.insert(s.runs).values(
                            workload_id=workload_id, started_at=r["created_at"], finished_at=r["created_at"],
                            settings=json.dumps(r["run_settings"]), status=RunStatus.IMPORTED.value)
                            .returning(s.runs.c.id)
                        ).scalar_one()
                    detail = dataclasses.replace(ResultDetail.from_json(r.get("detail")), imported=not prefer_imported)
                    self._insert_result(conn, workload_id, run_id, r["adopted"], r["config"], r.get("default_s"),
                                        r.get("best_s"), (r.get("speedup"), r.get("speedup_low"),
                                                          r.get("speedup_high")), detail, r["created_at"])
                    counts["results"] += 1
        return ImportReport(counts, tuple(skipped))
