"""The store read for applying a config, with the standard library's sqlite3: what `xtat run`'s
interceptor and `xtat.jit` read for a program (`apply.lookup`), without importing SQLAlchemy, which
took a third of a second of every process that applies a config.

`SqliteReader` is `base.LookupReads`, the read interface a lookup needs, for an SQLite file of this
xtat's schema version, read-only; `Store` (`sql.py`) has it for every location. Both make records
from rows with the same functions (`rows.py`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from xtat.store.records import Result, Trial, WorkloadRecord
from xtat.store.rows import (
    APPLICATION,
    SCHEMA_VERSION,
    in_force,
    result_record,
    run_settings,
    trial_record,
    workload_record,
)


class SqliteReader:
    """`LookupReads` over an SQLite store file, opened read-only (`open`)."""

    def __init__(self, connection: sqlite3.Connection, where: str):
        self._connection = connection
        self._connection.row_factory = sqlite3.Row
        self.where = where

    @classmethod
    def open(cls, file: Path) -> SqliteReader | None:
        """A reader of `file` when it is an xtat store of this schema version; None otherwise (no
        file, another version, not xtat's, unreadable): `Store` then reads it, and says why."""
        if not file.exists():
            return None
        try:
            connection = sqlite3.connect(f"file:{file}?mode=ro", uri=True, timeout=30)
        except sqlite3.Error:
            return None
        try:
            meta = dict(connection.execute("SELECT key, value FROM meta").fetchall())
            if (meta.get("application") == APPLICATION and meta.get("schema_version") == str(SCHEMA_VERSION)
                    and connection.execute("PRAGMA quick_check").fetchone()[0] == "ok"):
                return cls(connection, str(file))
        except sqlite3.Error:
            pass
        connection.close()
        return None

    def _all(self, query: str, *parameters: object) -> list[sqlite3.Row]:
        return self._connection.execute(query, parameters).fetchall()

    def is_new(self) -> bool:
        return False  # `open` found its schema version

    def workload(self, fingerprint: str) -> WorkloadRecord | None:
        found = self._all("SELECT * FROM workloads WHERE fingerprint = ?", fingerprint)
        return workload_record(found[0]) if found else None

    def workloads_of_program(self, program: str) -> list[WorkloadRecord]:
        return [workload_record(row) for row in self._all("SELECT * FROM workloads WHERE program = ? ORDER BY id",
                                                          program)]

    def latest_result(self, workload_id: int) -> Result | None:
        return in_force(result_record(row) for row in self._all("SELECT * FROM results WHERE workload_id = ? "
                                                                "ORDER BY id", workload_id))

    def run_settings(self, run_id: int | None) -> dict | None:
        found = [] if run_id is None else self._all("SELECT settings FROM runs WHERE id = ?", run_id)
        return run_settings(found[0][0]) if found else None

    def trials(self, workload_id: int) -> list[Trial]:
        return [trial_record(row) for row in self._all("SELECT * FROM trials WHERE workload_id = ? ORDER BY id",
                                                       workload_id)]

    def close(self) -> None:
        self._connection.close()
