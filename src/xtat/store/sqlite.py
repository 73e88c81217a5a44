"""The results store: every attempt, failures included, in SQLite.

WAL mode and a busy timeout let several tuners and `xtat.jit` readers share
one file. Records are JSON columns; nothing is ever pickled. A file that is
not ours, is corrupt, or was written by a newer schema is refused before
anything is written to it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from xtat.errors import StoreError
from xtat.status import FINAL_STATUSES, TrialStatus
from xtat.test_hooks import hook

SCHEMA_VERSION = 3  # 2: trials.metrics, machine table; 3: trials.raced
APPLICATION = "xtat"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS workloads (
    id INTEGER PRIMARY KEY,
    fingerprint TEXT NOT NULL UNIQUE,
    program TEXT NOT NULL,
    name TEXT NOT NULL,
    env TEXT NOT NULL,
    info TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS workloads_program ON workloads(program);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    workload_id INTEGER NOT NULL REFERENCES workloads(id),
    started_at REAL NOT NULL,
    finished_at REAL,
    settings TEXT NOT NULL,
    status TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY,
    workload_id INTEGER NOT NULL REFERENCES workloads(id),
    run_id INTEGER REFERENCES runs(id),
    config_key TEXT NOT NULL,
    config TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    compile_s REAL,
    exe_hash TEXT,
    median_s REAL,
    ci_low_s REAL,
    ci_high_s REAL,
    samples TEXT,
    max_abs_err REAL,
    max_rel_err REAL,
    same_as INTEGER REFERENCES trials(id),
    worker_s REAL,
    spent_s REAL,
    created_at REAL NOT NULL,
    finished_at REAL,
    metrics TEXT,
    raced INTEGER NOT NULL DEFAULT 0,
    UNIQUE (workload_id, config_key)
);
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY,
    workload_id INTEGER NOT NULL REFERENCES workloads(id),
    run_id INTEGER REFERENCES runs(id),
    adopted INTEGER NOT NULL,
    config TEXT NOT NULL,
    default_s REAL,
    best_s REAL,
    speedup REAL,
    speedup_low REAL,
    speedup_high REAL,
    detail TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS machine (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    measured_at REAL NOT NULL
);
"""

# Additive upgrades from older schema versions, applied in one transaction on open for writing.
_UPGRADES = {
    2: ("ALTER TABLE trials ADD COLUMN metrics TEXT",),
    3: ("ALTER TABLE trials ADD COLUMN raced INTEGER NOT NULL DEFAULT 0",
        "UPDATE trials SET raced = 1 WHERE json_extract(metrics, '$.raced') = 1"),
}


@dataclass(frozen=True)
class Trial:
    id: int
    workload_id: int
    run_id: int | None
    config: dict
    status: TrialStatus
    error: str | None
    compile_s: float | None
    exe_hash: str | None
    median_s: float | None
    ci_low_s: float | None
    ci_high_s: float | None
    samples: list | None
    max_abs_err: float | None
    max_rel_err: float | None
    same_as: int | None
    worker_s: float | None
    spent_s: float | None
    created_at: float
    metrics: dict | None = None  # compile-time facts: peak memory, cost analysis, HLO features
    raced: bool = False  # timing stopped early: clearly slower than the incumbent (a few samples only)

    @property
    def config_key(self) -> str:
        from xtat.space.space import config_key

        return config_key(self.config)


_NUMBER = (int, float, type(None))


@dataclass(frozen=True)
class Field:
    """One recorded field of a trial: its JSON types in an export document, and where it goes."""

    name: str
    kinds: tuple[type, ...]  # JSON types an export document may give it (checked on import)
    stored_as_json: bool = False  # a JSON text column
    exported: bool = True  # ids of this store (same_as) do not travel
    finished: bool = True  # set by finish_trial
    required: bool = False  # an export document must have it


# The one list of a trial's recorded fields: what finish_trial may set, the export document's
# trial object, the import's insert and its validation all follow it (tests/test_store.py checks
# that it matches the schema and `Trial`).
TRIAL_FIELDS = (
    Field("config", (dict,), stored_as_json=True, finished=False, required=True),
    Field("config_key", (str,), finished=False, required=True),
    Field("status", (str,), finished=False, required=True),
    Field("error", (str, type(None))),
    Field("compile_s", _NUMBER),
    Field("exe_hash", (str, type(None))),
    Field("median_s", _NUMBER),
    Field("ci_low_s", _NUMBER),
    Field("ci_high_s", _NUMBER),
    Field("samples", (list, type(None)), stored_as_json=True),
    Field("max_abs_err", _NUMBER),
    Field("max_rel_err", _NUMBER),
    Field("same_as", (int, type(None)), exported=False),
    Field("worker_s", _NUMBER),
    Field("spent_s", _NUMBER),
    Field("created_at", (int, float), finished=False, required=True),
    Field("metrics", (dict, type(None)), stored_as_json=True),
    Field("raced", (bool,)),
)
_BY_NAME = {f.name: f for f in TRIAL_FIELDS}


def _column_value(name: str, value: object) -> object:
    """A trial field as its column stores it."""
    if _BY_NAME[name].stored_as_json:
        return None if value is None else json.dumps(value)
    return value  # sqlite3 stores a bool (raced) as 0 or 1


@dataclass(frozen=True)
class WorkloadRecord:
    id: int
    fingerprint: str
    program: str
    name: str
    env: dict
    info: dict


@dataclass(frozen=True)
class Result:
    id: int
    workload_id: int
    run_id: int | None
    adopted: bool
    config: dict
    default_s: float | None
    best_s: float | None
    speedup: float | None
    speedup_low: float | None
    speedup_high: float | None
    detail: dict
    created_at: float


def default_path() -> Path:
    return Path(os.environ.get("XTAT_DB", Path.home() / ".cache" / "xtat" / "xtat.db"))


def _inspect(path: Path) -> None:
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
            if not tables:
                return
            if "meta" not in tables:
                raise StoreError(f"{path} is an SQLite database but not xtat's (no meta table); use another --db")
            meta = dict(con.execute("SELECT key, value FROM meta"))
            check = con.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is corrupt or unreadable ({exc}); restore it or use another --db") from exc
    if check != "ok":
        raise StoreError(f"{path} fails SQLite's integrity check ({check}); restore it or use another --db")
    if meta.get("application") != APPLICATION:
        raise StoreError(f"{path} is not an xtat database; use another --db")
    version = int(meta.get("schema_version", "0"))
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema version {version}, newer than this xtat's {SCHEMA_VERSION}; upgrade xtat"
        )


def _schema_version(con: sqlite3.Connection) -> int:
    """The file's schema version; 0 for a new, empty file."""
    if not con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone():
        return 0
    row = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return int(row[0]) if row else 0


class Store:
    """The SQLite implementation of `store.base.Storage`."""

    def __init__(self, path: Path, con: sqlite3.Connection, read_only: bool):
        self.path = path
        self._con = con
        self.read_only = read_only

    @classmethod
    def open(cls, path: str | Path | None = None, read_only: bool = False) -> Store:
        path = Path(path) if path is not None else default_path()
        _inspect(path)
        if read_only:
            if not path.exists():
                raise StoreError(f"no database at {path}")
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                if not path.exists():  # tuning records are the owner's: created readable by the owner only
                    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
                con = sqlite3.connect(path, timeout=30)
                con.execute("PRAGMA journal_mode=WAL")
                con.execute("PRAGMA busy_timeout=30000")
                con.execute("PRAGMA foreign_keys=ON")
                if hook("XTAT_TEST_MAX_PAGES"):  # TEST-ONLY: simulate a full disk
                    con.execute(f"PRAGMA max_page_count={int(hook('XTAT_TEST_MAX_PAGES'))}")
                with con:
                    con.execute("BEGIN IMMEDIATE")
                    version = _schema_version(con)
                    for target in range(version + 1, SCHEMA_VERSION + 1) if version else ():
                        for statement in _UPGRADES[target]:
                            con.execute(statement)
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            con.execute(statement)
                    con.execute("INSERT OR IGNORE INTO meta VALUES ('application', ?)", (APPLICATION,))
                    con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open {path} for writing ({exc}); check the path and its permissions") from exc
        con.row_factory = sqlite3.Row
        return cls(path, con, read_only)

    # -- machine facts (e.g. roofline peaks), keyed by what they describe ----------

    def machine_fact(self, key: str) -> dict | None:
        row = self._con.execute("SELECT value FROM machine WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def set_machine_fact(self, key: str, value: dict) -> None:
        with self._write() as con:
            con.execute("INSERT OR REPLACE INTO machine VALUES (?, ?, ?)", (key, json.dumps(value), time.time()))

    def is_new(self) -> bool:
        """No tables yet: a tuner has just created the file and not yet committed its schema."""
        return _schema_version(self._con) == 0

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One transaction; rolled back whole on any error (disk full, read-only)."""
        try:
            with self._con:
                self._con.execute("BEGIN IMMEDIATE")
                yield self._con
        except sqlite3.Error as exc:
            raise StoreError(f"write to {self.path} failed and was rolled back: {exc}") from exc

    # -- workloads ------------------------------------------------------------

    def upsert_workload(self, fingerprint: str, program: str, name: str, env: dict, info: dict) -> int:
        with self._write() as con:
            con.execute(
                "INSERT OR IGNORE INTO workloads (fingerprint, program, name, env, info, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (fingerprint, program, name, json.dumps(env), json.dumps(info), time.time()),
            )
            row = con.execute("SELECT id FROM workloads WHERE fingerprint=?", (fingerprint,)).fetchone()
        return int(row[0])

    def workloads(self) -> list[WorkloadRecord]:
        rows = self._con.execute("SELECT * FROM workloads ORDER BY id").fetchall()
        return [self._workload(row) for row in rows]

    def workload(self, fingerprint: str) -> WorkloadRecord | None:
        row = self._con.execute("SELECT * FROM workloads WHERE fingerprint=?", (fingerprint,)).fetchone()
        return self._workload(row) if row else None

    def workloads_of_program(self, program: str) -> list[WorkloadRecord]:
        rows = self._con.execute("SELECT * FROM workloads WHERE program=? ORDER BY id", (program,)).fetchall()
        return [self._workload(row) for row in rows]

    def find_workload(self, name_or_fingerprint: str) -> WorkloadRecord:
        """By fingerprint (or a unique prefix of it), else by name (the newest)."""
        rows = self._con.execute(
            "SELECT * FROM workloads WHERE fingerprint LIKE ? OR name=? ORDER BY id DESC",
            (name_or_fingerprint + "%", name_or_fingerprint),
        ).fetchall()
        if not rows:
            raise StoreError(f"no workload named {name_or_fingerprint!r} in {self.path}; `xtat show` lists them")
        return self._workload(rows[0])

    @staticmethod
    def _workload(row: sqlite3.Row) -> WorkloadRecord:
        return WorkloadRecord(row["id"], row["fingerprint"], row["program"], row["name"],
                              json.loads(row["env"]), json.loads(row["info"]))

    # -- runs -----------------------------------------------------------------

    def begin_run(self, workload_id: int, settings: dict) -> int:
        with self._write() as con:
            cur = con.execute(
                "INSERT INTO runs (workload_id, started_at, settings, status) VALUES (?, ?, ?, 'running')",
                (workload_id, time.time(), json.dumps(settings)),
            )
        return _row_id(cur)

    def run_settings(self, run_id: int | None) -> dict | None:
        """The settings a run recorded (None for an unknown run, or a result that came without one)."""
        if run_id is None:
            return None
        row = self._con.execute("SELECT settings FROM runs WHERE id=?", (run_id,)).fetchone()
        try:
            settings = json.loads(row[0]) if row else None
        except (TypeError, ValueError):
            return None
        return settings if isinstance(settings, dict) else None

    def finish_run(self, run_id: int, status: str) -> None:
        with self._write() as con:
            con.execute("UPDATE runs SET finished_at=?, status=? WHERE id=?", (time.time(), status, run_id))

    # -- trials ---------------------------------------------------------------

    def trial(self, workload_id: int, key: str) -> Trial | None:
        row = self._con.execute(
            "SELECT * FROM trials WHERE workload_id=? AND config_key=?", (workload_id, key)
        ).fetchone()
        return self._trial(row) if row else None

    def trials(self, workload_id: int) -> list[Trial]:
        rows = self._con.execute("SELECT * FROM trials WHERE workload_id=? ORDER BY id", (workload_id,)).fetchall()
        return [self._trial(row) for row in rows]

    def start_trial(self, workload_id: int, run_id: int, config: dict, key: str) -> int | None:
        """Mark a config in flight. A row left `running` by a killed tuner is reused;
        None when another tuner sharing the file has finished it meanwhile."""
        with self._write() as con:
            row = con.execute(
                "SELECT id, status FROM trials WHERE workload_id=? AND config_key=?", (workload_id, key)
            ).fetchone()
            if row is None:
                cur = con.execute(
                    "INSERT INTO trials (workload_id, run_id, config_key, config, status, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (workload_id, run_id, key, json.dumps(config), TrialStatus.RUNNING.value, time.time()),
                )
                return _row_id(cur)
            if row["status"] != TrialStatus.RUNNING:
                return None
            con.execute("UPDATE trials SET run_id=? WHERE id=?", (run_id, row["id"]))
            return int(row["id"])

    def finish_trial(self, trial_id: int, status: TrialStatus, **fields) -> None:
        if status not in FINAL_STATUSES:
            raise ValueError(f"unknown trial status {status!r}")
        unknown = {name for name in fields if name not in _BY_NAME or not _BY_NAME[name].finished}
        if unknown:
            raise ValueError(f"unknown trial fields {sorted(unknown)}")
        fields = {name: _column_value(name, value) for name, value in fields.items()}
        columns = ", ".join(f"{name}=?" for name in fields)
        with self._write() as con:
            con.execute(
                f"UPDATE trials SET status=?, finished_at=?{', ' + columns if columns else ''} WHERE id=?",
                (TrialStatus(status).value, time.time(), *fields.values(), trial_id),
            )

    def demote_trial(self, trial_id: int, error: str) -> None:
        """An adopted-candidate check failed later: it may never be chosen again."""
        with self._write() as con:
            con.execute("UPDATE trials SET status='wrong_result', error=? WHERE id=?", (error, trial_id))

    def measured_with_hash(self, workload_id: int, exe_hash: str, asking_id: int) -> Trial | None:
        """The earliest measured trial of this executable other than the asking trial's own row (which a
        second tuner measuring the same config may already have finished)."""
        row = self._con.execute(
            "SELECT * FROM trials WHERE workload_id=? AND exe_hash=? AND same_as IS NULL "
            "AND status NOT IN ('running', 'duplicate') AND id IS NOT ? ORDER BY id LIMIT 1",
            (workload_id, exe_hash, asking_id),
        ).fetchone()
        return self._trial(row) if row else None

    @staticmethod
    def _trial(row: sqlite3.Row) -> Trial:
        values = {f.name: row[f.name] for f in dataclasses.fields(Trial)}
        for field in TRIAL_FIELDS:
            if field.stored_as_json and field.name in values:
                values[field.name] = json.loads(values[field.name]) if values[field.name] else None
        return Trial(**{**values, "status": TrialStatus(values["status"]), "raced": bool(values["raced"])})

    # -- results --------------------------------------------------------------

    def add_result(self, workload_id: int, run_id: int | None, adopted: bool, config: dict,
                   default_s: float | None, best_s: float | None, speedup: tuple[float, float, float] | None,
                   detail: dict) -> int:
        median, low, high = speedup if speedup else (None, None, None)
        with self._write() as con:
            cur = con.execute(
                "INSERT INTO results (workload_id, run_id, adopted, config, default_s, best_s, speedup, "
                "speedup_low, speedup_high, detail, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (workload_id, run_id, int(adopted), json.dumps(config), default_s, best_s, median, low, high,
                 json.dumps(detail), time.time()),
            )
        return _row_id(cur)

    def mark_rejected(self, result_id: int, reason: str, env: dict) -> None:
        """Note on a result that this XLA refused to apply it (kept, never deleted)."""
        with self._write() as con:
            row = con.execute("SELECT detail FROM results WHERE id=?", (result_id,)).fetchone()
            if row is None:
                return
            detail = json.loads(row[0])
            detail.setdefault("rejected_at_apply", []).append({"reason": reason[:500], "env": env, "at": time.time()})
            con.execute("UPDATE results SET detail=? WHERE id=?", (json.dumps(detail), result_id))

    def latest_result(self, workload_id: int) -> Result | None:
        """The decision in force: the newest result made here, or, where none was, the newest imported one
        (`xtat import --prefer-imported` imports results as if made here)."""
        row = self._con.execute(
            "SELECT * FROM results WHERE workload_id=? "
            "ORDER BY coalesce(json_extract(detail, '$.imported'), 0) = 1, created_at DESC, id DESC LIMIT 1",
            (workload_id,),
        ).fetchone()
        return self._result(row) if row else None

    def results(self, workload_id: int) -> list[Result]:
        rows = self._con.execute("SELECT * FROM results WHERE workload_id=? ORDER BY id", (workload_id,)).fetchall()
        return [self._result(row) for row in rows]

    @staticmethod
    def _result(row: sqlite3.Row) -> Result:
        return Result(
            id=row["id"], workload_id=row["workload_id"], run_id=row["run_id"], adopted=bool(row["adopted"]),
            config=json.loads(row["config"]), default_s=row["default_s"], best_s=row["best_s"],
            speedup=row["speedup"], speedup_low=row["speedup_low"], speedup_high=row["speedup_high"],
            detail=json.loads(row["detail"]), created_at=row["created_at"],
        )

    # -- export / import --------------------------------------------------------

    def export(self) -> dict:
        workloads: list[dict] = []
        out = {"xtat_export": 1, "schema_version": SCHEMA_VERSION, "workloads": workloads}
        for w in self.workloads():
            workloads.append({
                "fingerprint": w.fingerprint, "program": w.program, "name": w.name, "env": w.env, "info": w.info,
                "trials": [_trial_json(t) for t in self.trials(w.id)],
                "results": [{**_result_json(r), "run_settings": self.run_settings(r.run_id)}
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
        with self._write() as con:
            for w in workloads:
                local = con.execute(
                    "SELECT count(*) FROM results r JOIN workloads w ON r.workload_id = w.id WHERE w.fingerprint=? "
                    "AND coalesce(json_extract(r.detail, '$.imported'), 0) = 0", (w["fingerprint"],)).fetchone()[0]
                cur = con.execute(
                    "INSERT OR IGNORE INTO workloads (fingerprint, program, name, env, info, created_at) "
                    "VALUES (?,?,?,?,?,?)",
                    (w["fingerprint"], w["program"], w["name"], json.dumps(w["env"]), json.dumps(w["info"]),
                     time.time()),
                )
                counts["workloads"] += cur.rowcount
                workload_id = con.execute("SELECT id FROM workloads WHERE fingerprint=?",
                                          (w["fingerprint"],)).fetchone()[0]
                present = 0
                exported = [f.name for f in TRIAL_FIELDS if f.exported]
                for t in w["trials"]:
                    # Exports of schema 2 kept `raced` among the metrics.
                    t = {"raced": bool((t.get("metrics") or {}).get("raced")), **t}
                    cur = con.execute(
                        f"INSERT OR IGNORE INTO trials (workload_id, finished_at, {', '.join(exported)}) "
                        f"VALUES (?, ?, {', '.join('?' for _ in exported)})",
                        (workload_id, time.time(), *(_column_value(name, t.get(name)) for name in exported)),
                    )
                    counts["trials"] += cur.rowcount
                    present += 1 - cur.rowcount
                if present:
                    skipped.append(f"{w['name']}: {present} trial(s) already recorded here, kept as they are")
                known = {row[0] for row in con.execute("SELECT created_at FROM results WHERE workload_id=?",
                                                        (workload_id,))}
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
                        run_id = con.execute(
                            "INSERT INTO runs (workload_id, started_at, finished_at, settings, status) "
                            "VALUES (?, ?, ?, ?, 'imported')",
                            (workload_id, r["created_at"], r["created_at"], json.dumps(r["run_settings"])),
                        ).lastrowid
                    detail = {**r.get("detail", {}), **({} if prefer_imported else {"imported": True})}
                    con.execute(
                        "INSERT INTO results (workload_id, run_id, adopted, config, default_s, best_s, speedup, "
                        "speedup_low, speedup_high, detail, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                        (workload_id, run_id, int(r["adopted"]), json.dumps(r["config"]), r.get("default_s"),
                         r.get("best_s"), r.get("speedup"), r.get("speedup_low"), r.get("speedup_high"),
                         json.dumps(detail), r["created_at"]),
                    )
                    counts["results"] += 1
        return ImportReport(counts, tuple(skipped))


@dataclass(frozen=True)
class ImportReport:
    added: dict[str, int]  # rows written, by table
    skipped: tuple[str, ...]  # what was not written or is not in force, and why


def _row_id(cursor: sqlite3.Cursor) -> int:
    assert cursor.lastrowid is not None, "an INSERT sets the row id"
    return cursor.lastrowid


def _trial_json(t: Trial) -> dict:
    return {f.name: getattr(t, f.name) for f in TRIAL_FIELDS if f.exported}


def _result_json(r: Result) -> dict:
    return {
        "adopted": r.adopted, "config": r.config, "default_s": r.default_s, "best_s": r.best_s,
        "speedup": r.speedup, "speedup_low": r.speedup_low, "speedup_high": r.speedup_high,
        "detail": r.detail, "created_at": r.created_at,
    }
