"""The Runner interface: what the tuning layer asks of measurement, in typed records.

A runner builds candidates, verifies their outputs against the default's and times them.
`runner.process.ProcessRunner` does it in worker processes (one per runtime environment,
killed on deadline); a test double that answers from a table lets the loop, racing and
adoption be tested in seconds (`tests/support/doubles.py`). Nothing above this interface knows
of processes, pipes or the worker protocol's wire format.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from xtat.core.candidate import Candidate
from xtat.core.errors import UserError
from xtat.core.status import TrialStatus
from xtat.runner.protocol import Compiled, Failed, InputSet, Timed, Verified
from xtat.runner.timing import Race, TimingPolicy
from xtat.runner.verify import Budget, Tolerance

DEFAULT_ID = "default"  # the build id of the unchanged program under default options


class WorkerFailure(Exception):
    """The measuring process did not answer: it died, ran past its deadline or out of memory."""

    def __init__(self, status: TrialStatus, error: str, build: str | None = None):
        super().__init__(error)
        self.status = status  # crash, timeout or oom
        self.error = error
        self.build = build  # the build id it was building or running, where known (`place`, `sample_pairs`)


class ExecutorKind(StrEnum):
    LOCAL = "local"  # worker processes on this machine
    RAY = "ray"  # workers on a Ray cluster (`runner.ray`)


@dataclass(frozen=True)
class Executor:
    """Where candidates are measured: `local`, `ray` (the cluster of $RAY_ADDRESS or this machine's,
    else a new local one) or `ray:ADDRESS`."""

    kind: ExecutorKind = ExecutorKind.LOCAL
    address: str | None = None  # a Ray cluster's address (host:port, or ray://host:port)

    @classmethod
    def parse(cls, text: str) -> Executor:
        kind, _, address = text.partition(":")
        if text == ExecutorKind.LOCAL.value:
            return cls()
        if kind == ExecutorKind.RAY.value and (address or ":" not in text):
            return cls(ExecutorKind.RAY, address or None)
        raise UserError(f"--executor {text!r}: choose local, ray (this machine's cluster, or a new local one) or "
                        "ray:ADDRESS (e.g. ray:10.0.0.5:6379)")

    def __str__(self) -> str:
        return self.kind.value + (f":{self.address}" if self.address else "")


@dataclass(frozen=True)
class Deployment:
    """How `Runner.place` builds when not by lower().compile(): through the deploy path
    (`jax.jit(..., compiler_options=)`, outputs verified within `tolerance`), and with `as_called`,
    the user's own function called on the user's argument tree, imported from the workload's
    source, so each call does the host work the user's step does (flattening that tree)."""

    tolerance: Tolerance
    as_called: bool = False


class Placement(Protocol):
    """Builds placed for interleaved timing, one fresh worker per environment."""

    failed: dict[str, str]  # build id -> why it did not build

    def sample_pairs(self, shuffle: random.Random) -> dict[str, tuple[float, float]]:
        """Each placed build but the default (`DEFAULT_ID`, which must be placed), in a new order,
        sampled next to a sample of the default, the pair in a random order: build id -> (the
        default's seconds, the build's). Whichever goes first can be systematically slower or
        faster, and that must not decide anything."""
        ...


Pairs = dict[str, list[tuple[float, float]]]  # build id -> (the default's seconds, the build's), per round


class Runner(Protocol):
    """Builds, verifies and times candidates of one captured workload.

    Ids name builds: `DEFAULT_ID` for the default, a config's id otherwise. A failure of the
    measuring machinery (a worker that died, hung or ran out of memory) is a `WorkerFailure`
    from `interleave` and `place`; every other method reports it as `Failed`.
    """

    budget: Budget  # what a chaotic output may move, calibrated on the default (`runner.verify`)
    node: str  # the machine it measures on (a host name, or a Ray node)

    def slots(self) -> Sequence[Runner]:
        """The runners that measure search candidates at once: the runner itself when it measures
        one candidate at a time; one per worker of a cluster (`runner.ray`)."""
        ...

    def losses(self) -> list[str]:
        """The machines (nodes) lost while measuring since the last call, each loss followed by one
        retry elsewhere; read by the trial that suffered them."""
        ...

    def start(self) -> None:
        """Make sure the default builds and runs (its outputs become the reference); raises UserError if not."""
        ...

    def set_deadlines(self, compile_s: float, measure_s: float) -> None:
        """Deadlines follow from the default's compile and measure times."""
        ...

    def build(self, id: str, candidate: Candidate, *, is_default: bool = False) -> Compiled | Failed:
        """Compile the candidate; `Compiled.exe_hash` names its executable (with its environment)."""
        ...

    def measure(self, id: str, candidate: Candidate, tolerance: Tolerance, timing: TimingPolicy, *,
                is_default: bool = False, race: Race | None = None) -> Timed | Failed:
        """Verify the build `id` (made by `build`) on both input sets, then time it."""
        ...

    def release(self, id: str, candidate: Candidate) -> None:
        """The build `id` is not needed any more."""
        ...

    def verify(self, id: str, candidate: Candidate, tolerance: Tolerance, repeats: int = 1,
               input_set: InputSet = InputSet.VERIFY) -> Verified | Failed:
        """Check the build `id` `repeats` times on an input set (by default the second, `make_inputs(1)`),
        building it again if its worker was restarted."""
        ...

    def interleave(self, builds: list[tuple[str, Candidate]], rounds: int, timing: TimingPolicy,
                   deploy: Deployment | None = None) -> Pairs | None:
        """Build the default (`DEFAULT_ID`, which `builds` holds) and the rest in fresh workers (as
        `place` builds), then time `rounds` rounds of `Placement.sample_pairs`; builds that fail are
        left out, and None when the default failed."""
        ...

    def place(self, builds: list[tuple[str, Candidate]], timing: TimingPolicy,
              deploy: Deployment | None = None) -> Placement:
        """Build each in a fresh worker and calibrate it for `Placement.sample_pairs`. With `deploy`,
        builds go through the deploy path as it says (`Deployment`) instead of lower().compile()."""
        ...

    def measure_setups_as(self, deploy: Deployment) -> None:
        """From now on, a process setup's factor (the default's speed in a process entering it over its
        speed in a default process) is measured in pairs of processes deployed as `deploy` says: where
        the finalists are measured as the user's step is called, so is what a setup is worth, and not
        on the flat program the search times."""
        ...

    def can_call_as_user(self) -> bool:
        """Whether builds can be deployed as called (`Deployment.as_called`): the workload has a source."""
        ...

    def passes_that_ran(self, candidate: Candidate) -> list[str]:
        """HLO passes that changed the candidate's program."""
        ...

    def autotune_results(self, candidate: Candidate) -> str:
        """XLA:GPU's autotune results for the candidate's program (text of xla.AutotuneResults),
        compiled in a fresh process so that nothing autotuned before is in them; "" where XLA wrote none."""
        ...

    def discard(self, candidate: Candidate) -> None:
        """Its worker's state is suspect (after an out-of-memory): the next build starts fresh."""
        ...

    def pids(self) -> list[int]:
        """The measuring processes (the load monitor counts their CPU time as xtat's own)."""
        ...

    def close(self) -> None:
        ...
