"""The Storage interface: what the tuner, `xtat.jit`, compare and bench ask of a store.

Records are frozen dataclasses (`store.records`); a store is a context manager that closes on
exit. `store.sql.Store` implements it on SQLAlchemy, for one SQLite file (the tuners of one
machine) or a PostgreSQL study (tuners on many machines); `tests/support/doubles.MemoryStore` is a test
double.
Every row may come from another machine or person: nothing read from a store is applied
before `store.vetting` has vetted it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from xtat.core.status import RunStatus

if TYPE_CHECKING:
    from xtat.store.records import ImportReport, Result, ResultDetail, Timing, Trial, TrialOutcome, WorkloadRecord


class Storage(Protocol):
    where: str  # where it lives, for messages: a file's path, or a server's URL without its password

    def __enter__(self) -> Storage: ...

    def __exit__(self, *exc: object) -> None: ...

    def close(self) -> None: ...

    # workloads: one row per fingerprint (program and environment)
    def upsert_workload(self, fingerprint: str, program: str, name: str, env: dict, info: dict) -> int: ...

    def workload(self, fingerprint: str) -> WorkloadRecord | None: ...

    def workloads(self) -> list[WorkloadRecord]: ...

    def workloads_of_program(self, program: str) -> list[WorkloadRecord]: ...

    def find_workload(self, name_or_fingerprint: str) -> WorkloadRecord: ...

    # runs: one row per tuning run, with the settings it was asked
    def begin_run(self, workload_id: int, settings: dict, owner: str | None = None, lease_s: float = 60.0) -> int:
        """A run, `searching` under `owner`'s lease (renewed by `renew`)."""
        ...

    def set_run_status(self, run_id: int, status: RunStatus) -> None: ...

    def searching_elsewhere(self, workload_id: int, owner: str) -> int:
        """How many runs of the workload other live tuners are still searching."""
        ...

    def finish_run(self, run_id: int, status: RunStatus = RunStatus.FINISHED) -> None: ...

    def run_settings(self, run_id: int | None) -> dict | None: ...

    # trials: one row per config of a workload, claimed by one tuner, then finished
    def start_trial(self, workload_id: int, run_id: int | None, config: dict, key: str,
                    owner: str | None = None, lease_s: float = 60.0) -> int | None:
        """Claim a config for `owner` under a lease; None when it is finished, or claimed by another
        owner whose lease holds."""
        ...

    def renew(self, owner: str, lease_s: float) -> int:
        """The heartbeat: extend the leases of every claim `owner` holds."""
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

    def retime_trial(self, trial_id: int, timing: Timing) -> None:
        """Replace a finished trial's timing (its shortlist re-timing adds a block of pairs)."""
        ...

    def demote_trial(self, trial_id: int, error: str) -> None: ...

    def trial(self, workload_id: int, key: str) -> Trial | None: ...

    def trials(self, workload_id: int) -> list[Trial]: ...

    def measured_with_hash(self, workload_id: int, exe_hash: str, asking_id: int) -> Trial | None:
        """The earliest measured trial of this executable other than the asking one (deduplication)."""
        ...

    # results: the decision of each run; the newest made here is in force
    def add_result(self, workload_id: int, run_id: int | None, adopted: bool, config: dict,
                   default_s: float | None, best_s: float | None, speedup: tuple[float, float, float] | None,
                   detail: ResultDetail) -> int: ...

    def latest_result(self, workload_id: int) -> Result | None: ...

    def results(self, workload_id: int) -> list[Result]: ...

    def mark_rejected(self, result_id: int, reason: str, env: dict) -> None: ...

    # machine facts (roofline peaks) and exchange between stores
    def machine_fact(self, key: str) -> dict | None: ...

    def set_machine_fact(self, key: str, value: dict) -> None: ...

    def export(self) -> dict: ...

    def import_(self, document: dict, prefer_imported: bool = False) -> ImportReport: ...
