"""The store's interfaces, one per kind of user, as Optuna documents its storages: what each role
may ask of a store, and what a store guarantees when many processes ask at once.

- `LookupReads`: applying a config (`xtat.jit`, `xtat run`'s interceptor, `xtat apply`): find a
  program's workload, its decision in force and what vetting needs. Read-only.
- `TuningStorage`: one tuning run (`tuner`, `tuning/`): runs, trials and their claims, named
  locks, decisions, machine facts. Adds to `LookupReads`.
- `ProfileStorage`: `xtat profile` and `xtat tune --profile`: scripts' profiles.
- `ExchangeStorage`: `xtat export` and `xtat import`: every record, as one document.
- `Storage`: all of them, and the context manager that closes it (`store.open_store`).

Implementations: `store.sql.Store` on SQLAlchemy, for one SQLite file (the tuners of one machine)
or a PostgreSQL study (tuners on many machines); `store.reader.SqliteReader`, `LookupReads` on the
standard library's sqlite3 (no SQLAlchemy in a process that only applies configs);
`tests/support/doubles.MemoryStore`, a test double of `TuningStorage` (mypy checks that it is one).

Guarantees under concurrency (both backends; SQLite serialises writers on the file, PostgreSQL
with advisory locks):

- Every write is one transaction: a reader sees a trial, a result or an import whole or not at
  all, and a killed writer leaves no partial row.
- A config of a workload is claimed by one owner at a time (`start_trial`): a second tuner gets
  None while the first's lease holds (its heartbeat, `renew`, extends it); a claim whose lease
  ran out, or whose owner process on this host is dead, is taken over. A finished trial is never
  claimed again, so no config is measured twice.
- A named lock (`try_lock`) has one owner at a time, under the same leases.
- Records are never deleted or rewritten by another run: a trial's timing is replaced only by its
  own run's re-timing (`retime_trial`), a decision is added, never changed (`mark_rejected` only
  adds a note); `latest_result` is the newest decision made here, else the newest imported one.

Every row may come from another machine or person: nothing read from a store is applied before
`store.vetting` has vetted it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from xtat.core.status import RunStatus, TrialStatus

if TYPE_CHECKING:
    from xtat.store.records import (
        ImportReport,
        ProfiledProgram,
        ProfileRecord,
        Result,
        ResultDetail,
        Timing,
        Trial,
        TrialOutcome,
        WorkloadRecord,
    )


class LookupReads(Protocol):
    """What looking a program up and vetting its adopted config read from a store."""

    where: str  # where it lives, for messages: a file's path, or a server's URL without its password

    def is_new(self) -> bool:
        """Whether nothing was ever written to it."""
        ...

    def workload(self, fingerprint: str) -> WorkloadRecord | None: ...

    def workloads_of_program(self, program: str) -> list[WorkloadRecord]:
        """The workloads of one program key, in every environment (the others are stale here)."""
        ...

    def latest_result(self, workload_id: int) -> Result | None:
        """The decision in force: the newest made here, else the newest imported."""
        ...

    def run_settings(self, run_id: int | None) -> dict | None:
        """The settings a run was asked (its opt-ins decide what vetting allows)."""
        ...

    def trials(self, workload_id: int) -> list[Trial]: ...

    def close(self) -> None: ...


class TuningStorage(LookupReads, Protocol):
    """What one tuning run asks of a store, besides the reads of a lookup."""

    # workloads: one row per fingerprint (program and environment)
    def upsert_workload(self, fingerprint: str, program: str, name: str, env: dict, info: dict) -> int: ...

    def workloads(self) -> list[WorkloadRecord]: ...

    def find_workload(self, name_or_fingerprint: str) -> WorkloadRecord:
        """By name or fingerprint prefix; UserError naming the choices when none or several match."""
        ...

    # runs: one row per tuning run, with the settings it was asked
    def begin_run(self, workload_id: int, settings: dict, owner: str | None = None, lease_s: float = 60.0) -> int:
        """A run, `searching` under `owner`'s lease (renewed by `renew`)."""
        ...

    def set_run_status(self, run_id: int, status: RunStatus) -> None: ...

    def finish_run(self, run_id: int, status: RunStatus = RunStatus.FINISHED) -> None: ...

    # trials: one row per config of a workload, claimed by one tuner, then finished
    def start_trial(self, workload_id: int, run_id: int | None, config: dict, key: str,
                    owner: str | None = None, lease_s: float = 60.0) -> int | None:
        """Claim a config for `owner` under a lease; None when it is finished, or claimed by another
        owner whose lease holds."""
        ...

    def renew(self, owner: str, lease_s: float) -> int:
        """The heartbeat: extend the leases of every claim `owner` holds; how many it holds."""
        ...

    def claimed_elsewhere(self, workload_id: int, owner: str) -> list[Trial]:
        """Running trials that another owner's live lease holds."""
        ...

    def try_lock(self, name: str, owner: str, lease_s: float) -> bool:
        """Take a named lock under a lease (renewed by `renew`) unless another owner holds it."""
        ...

    def unlock(self, name: str, owner: str) -> None: ...

    def finish_trial(self, trial_id: int, outcome: TrialOutcome) -> None:
        """Record how a claimed trial ended; its claim ends with it."""
        ...

    def retime_trial(self, trial_id: int, timing: Timing, search_pairs: int) -> None:
        """Replace a finished trial's timing (its shortlist re-timing adds a block of pairs), noting
        that the first `search_pairs` of its pairs are the search's (`Trial.search_pairs`)."""
        ...

    def demote_trial(self, trial_id: int, error: str, status: TrialStatus = TrialStatus.WRONG_RESULT) -> None:
        """A finished trial failed a later check (`wrong_result`), or crashed its worker when run again
        (`crash`): never chosen again."""
        ...

    def trial(self, workload_id: int, key: str) -> Trial | None: ...

    def measured_with_hash(self, workload_id: int, exe_hash: str, asking_id: int) -> Trial | None:
        """The earliest measured trial of this executable other than the asking one (deduplication)."""
        ...

    # results: the decision of each run; the newest made here is in force
    def add_result(self, workload_id: int, run_id: int | None, adopted: bool, config: dict,
                   default_s: float | None, best_s: float | None, speedup: tuple[float, float, float] | None,
                   detail: ResultDetail) -> int: ...

    def results(self, workload_id: int) -> list[Result]: ...

    def mark_rejected(self, result_id: int, reason: str, env: dict) -> None:
        """Note on a decision that this XLA refused to apply it (kept, never deleted)."""
        ...

    # machine facts (roofline peaks), measured once per machine
    def machine_fact(self, key: str) -> dict | None: ...

    def set_machine_fact(self, key: str, value: dict) -> None: ...


class ProfileStorage(Protocol):
    """Scripts' profiles (`xtat profile`): each run of a script, and the programs it compiled."""

    def add_profile(self, name: str, command: list[str], cwd: str, env: dict, complete: bool, exit_code: int,
                    wall_s: float, notes: list[str], programs: list[ProfiledProgram]) -> int: ...

    def latest_profile(self, name: str) -> ProfileRecord | None: ...

    def profiled_programs(self, profile_id: int) -> list[ProfiledProgram]: ...


class ExchangeStorage(Protocol):
    """Every record as one document, and a document's records written: `xtat export`, `xtat import`."""

    def export(self) -> dict: ...

    def import_(self, document: dict, prefer_imported: bool = False) -> ImportReport:
        """Validated and vetted whole before anything is written: refused whole, or written in one
        transaction; a decision made here is not replaced unless `prefer_imported`."""
        ...


class Storage(TuningStorage, ProfileStorage, ExchangeStorage, Protocol):
    """A whole store (`store.open_store`), closed on leaving a `with` block."""

    def __enter__(self) -> Storage: ...

    def __exit__(self, *exc: object) -> None: ...
