"""The closed vocabulary of a trial's outcome, shared by the runner (which reports failures),
the tuning loop and the stores (which record them)."""

from __future__ import annotations

from enum import StrEnum


class TrialStatus(StrEnum):
    RUNNING = "running"  # claimed by a tuner, not finished (or its tuner died)
    OK = "ok"  # verified and timed
    DUPLICATE = "duplicate"  # the same executable as an earlier trial: its measurement is that one's
    WRONG_RESULT = "wrong_result"  # outputs differ from the default's beyond tolerance
    COMPILE_ERROR = "compile_error"
    RUN_ERROR = "run_error"
    CRASH = "crash"  # the worker died
    TIMEOUT = "timeout"  # the worker ran past its deadline and was killed
    OOM = "oom"  # out of memory (an exception, or the kernel's killer)

    @property
    def measured(self) -> bool:
        """Whether a trial with this status carries a verified time (its own or its twin's)."""
        return self in (TrialStatus.OK, TrialStatus.DUPLICATE)

    @property
    def final(self) -> bool:
        return self is not TrialStatus.RUNNING


FINAL_STATUSES = tuple(s for s in TrialStatus if s.final)


class RunStatus(StrEnum):
    """Where a tuning run is: tuners sharing a study decide once every search of the workload is over."""

    SEARCHING = "running"  # asking, measuring (or its tuner died: its lease runs out)
    DECIDING = "deciding"  # its search is over: waiting for the others', or taking the decision
    FINISHED = "finished"
    IMPORTED = "imported"  # the run of a result brought in by `xtat import`
