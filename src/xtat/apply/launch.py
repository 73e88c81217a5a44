"""`xtat run`: start a program in the runtime environment its workloads were tuned for, with the
adopted compile options of every program it compiles.

A process cannot change its CPU count for XLA (the thread pool follows the
affinity at start) or its host device count (XLA_FLAGS is read once) after
jax has started, so these decisions are applied by the launcher: it sets
its own affinity and environment and then replaces itself with the program
(`exec`), so signals, the exit status and the process id are the program's.
The environment it leaves puts `boot/sitecustomize.py` first on the path,
which applies the compile options inside the program (`intercept.py`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # this module is `xtat run`'s start: it imports neither jax nor the store until it must
    from xtat.core.candidate import ProcessSetup
    from xtat.store import TuningStorage


@dataclass(frozen=True)
class RuntimePlan:
    """The process setup to enter, and the workloads it was adopted for."""

    setup: ProcessSetup
    workloads: tuple[str, ...]
    skipped: tuple[str, ...] = ()  # adopted elsewhere (another device or version) or refused: not applied

    def describe(self) -> str:
        if not self.setup:
            return "no runtime decision adopted for this machine: the program keeps its CPUs and devices"
        return f"set {self.setup.describe()}, adopted for {', '.join(self.workloads)}"


def plan(store: TuningStorage, env: dict[str, str], workload: str | None = None) -> RuntimePlan:
    """The adopted process setup of the store's workloads tuned in this environment `env`.

    Workloads that disagree are refused unless one is named: a process has
    one affinity and one device count.
    """
    from xtat.apply.lookup import Unvetted, vetted
    from xtat.capture.workload import environment_differences
    from xtat.core.candidate import ProcessSetup
    from xtat.core.errors import UserError

    records = [store.find_workload(workload)] if workload else store.workloads()
    setups: dict[str, ProcessSetup] = {}
    skipped = []
    for record in records:
        result = store.latest_result(record.id)
        if result is None or not result.adopted:
            continue
        if record.env != env:
            skipped.append(f"{record.name} (stale here: {environment_differences(record.env, env)})")
            continue
        try:
            setup = vetted(store, record, result).process
        except Unvetted as refusal:
            skipped.append(f"{record.name} ({refusal})")
            continue
        if setup:
            setups[record.name] = setup
    distinct = set(setups.values())
    if len(distinct) > 1:
        listed = "; ".join(f"{name}: {_said(setup)}" for name, setup in sorted(setups.items()))
        raise UserError(f"the workloads in the store were tuned for different runtime environments ({listed}); "
                        "name the one this program runs with --workload NAME")
    if not distinct:
        return RuntimePlan(ProcessSetup(), (), tuple(skipped))
    setup = distinct.pop()
    try:
        setup.affinity()
    except UserError as exc:
        raise UserError(f"{', '.join(setups)}: {exc}") from None
    return RuntimePlan(setup, tuple(sorted(setups)), tuple(skipped))


def _said(setup: ProcessSetup) -> str:
    return ", ".join(([f"{setup.cpus} CPU(s)"] if setup.cpus else [])
                     + ([f"{setup.host_devices} host device(s)"] if setup.host_devices else []))


BOOT = Path(__file__).resolve().parent / "boot"  # its sitecustomize installs `intercept` in the program


def launch(runtime: RuntimePlan, command: list[str], db: str | Path | None) -> None:
    """Enter the plan's process setup and replace this process with `command`, whose Python processes
    compile with the adopted options of `db` (None: the default store); returns only on failure."""
    runtime.setup.enter()
    _exec(command, db)


def _exec(command: list[str], db: str | Path | None) -> None:
    from xtat.core.errors import UserError

    os.environ.update(program_environment(dict(os.environ), db))
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        raise UserError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from exc


def fast_run(arguments: list[str]) -> None:
    """`xtat run [--db PATH] -- COMMAND` without jax, typer or SQLAlchemy, when the store (an SQLite
    file, or none) holds no adopted runtime decision: nothing then needs this process's environment
    identity (jax, and its backend started), so it sets the program's environment and `exec`s at
    once. Returns, having done nothing, for anything else: the full command handles it."""
    db, command = _simple_run(arguments)
    if command is None:
        return
    file = sqlite_file(db)
    if file is None:
        return  # a server: SQLAlchemy and psycopg read it
    if file.exists():
        if _holds_runtime_decisions(file):
            return
        said = f"no runtime decision adopted in {file}: the program keeps its CPUs and devices"
    else:
        said = f"not applied: no store at {file}: nothing is tuned yet"
    sys.stderr.write(f"xtat run: {said}\n")
    sys.stderr.flush()
    try:
        _exec(command, db)
    except Exception:  # a command that does not start: the full command says why, with its exit status
        return


def _simple_run(arguments: list[str]) -> tuple[str | None, list[str] | None]:
    """(--db, the command) of `[--db PATH] -- COMMAND...`; (None, None) for any other form."""
    db = None
    rest = list(arguments)
    while rest and rest[0] != "--":
        if rest[0] == "--db" and len(rest) > 1:
            db, rest = rest[1], rest[2:]
        elif rest[0].startswith("--db="):
            db, rest = rest[0][len("--db="):], rest[1:]
        else:
            return None, None
    if len(rest) < 2:
        return None, None
    return db, rest[1:]


def sqlite_file(db: str | Path | None) -> Path | None:
    """The SQLite file of a store location (None: the default), read without SQLAlchemy; None for a
    server URL, or a location that is no store (opening it says why)."""
    from xtat.core.errors import StoreError
    from xtat.store.location import sqlite_path

    try:
        return sqlite_path(db or None)
    except StoreError:
        return None


def _adopted_in_force(file: Path) -> list[tuple[str, str, str]] | None:
    """(fingerprint, program key, config JSON) of each workload of an SQLite store whose decision in
    force (`store.rows.in_force`: the newest result made here, else the newest imported) adopts a
    config, read with the standard library. [] with no file or no results table; None when the file
    cannot be read this simply."""
    if not file.exists():
        return []
    try:
        with sqlite3.connect(f"file:{file}?mode=ro", uri=True) as conn:
            tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"workloads", "results"} <= tables:
                return []
            rows = conn.execute(
                "SELECT w.fingerprint, w.program, r.adopted, r.config, "
                "COALESCE(json_extract(r.detail, '$.imported'), 0), r.created_at, r.id "
                "FROM workloads w JOIN results r ON r.workload_id = w.id").fetchall()
    except sqlite3.Error:
        return None
    newest: dict[tuple[str, str], tuple[tuple[bool, float, int], bool, str]] = {}
    for fingerprint, program, adopted, config, imported, created_at, result_id in rows:
        order = (not imported, float(created_at), int(result_id))  # in_force's order
        key = (str(fingerprint), str(program))
        if key not in newest or order > newest[key][0]:
            newest[key] = (order, bool(adopted), str(config))
    return [(*key, config) for key, (_, adopted, config) in newest.items() if adopted]


def stored_keys(file: Path) -> set[str] | None:
    """The fingerprint and program key of every workload of an SQLite store with an adopted config
    in force (empty: no file, or nothing adopted): most programs a script compiles have no record,
    and a withdrawn config has nothing to apply, so this answers for them without SQLAlchemy. None
    when the file cannot be read this simply."""
    adopted = _adopted_in_force(file)
    return None if adopted is None else {key for fingerprint, program, _ in adopted for key in (fingerprint, program)}


def _holds_runtime_decisions(file: Path) -> bool:
    """Whether any workload's adopted config in force holds a runtime decision (or the file cannot
    be read this simply: then the full command reads it)."""
    adopted = _adopted_in_force(file)
    if adopted is None:
        return True
    try:
        return any((json.loads(config) or {}).get("runtime") for _, _, config in adopted)
    except (ValueError, AttributeError):
        return True


def program_environment(base: dict[str, str], db: str | Path | None) -> dict[str, str]:
    """The variables a program started by `xtat run` gets: the boot folder first on PYTHONPATH, and
    the store (a relative path made absolute: the program may change its directory)."""
    location = "" if db is None else str(db) if "://" in str(db) else str(Path(db).resolve())
    return {"PYTHONPATH": boot_path(base), "XTAT_RUN_DB": location}


def boot_path(base: dict[str, str]) -> str:
    """`base`'s PYTHONPATH with the boot folder first (`xtat run` and `xtat profile` alike)."""
    rest = [p for p in base.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(BOOT)]
    return os.pathsep.join([str(BOOT), *rest])
