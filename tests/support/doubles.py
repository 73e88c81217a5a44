"""Test doubles of the roles. `MemoryStore` is a TEST DOUBLE of `store.base.TuningStorage`. `FakeRunner`
is a TEST DOUBLE of `runner.base.Runner`: it compiles
nothing and times nothing. Each candidate's "time" comes from a function the test gives, with a
seeded 1% jitter per sample; its executable is named by its config, so configs that the stages
make into the same candidate are duplicates, as in real builds. It lets the loop, racing,
deduplication and adoption be tested in seconds."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field

from xtat.core.candidate import Candidate, ProcessSetup
from xtat.core.errors import UserError
from xtat.core.status import RunStatus, TrialStatus
from xtat.runner.base import DEFAULT_ID, Deployment, Pairs, Runner, WorkerFailure
from xtat.runner.protocol import Check, Compiled, Failed, InputSet, Timed, Verified
from xtat.runner.timing import Race, TimingPolicy, median_ci, paired
from xtat.runner.verify import Budget, Tolerance
from xtat.store.base import TuningStorage
from xtat.store.records import (
    Rejection,
    Result,
    ResultDetail,
    Timing,
    Trial,
    TrialOutcome,
    WorkloadRecord,
    unpacked_metrics,
)


def executable(candidate: Candidate) -> str:
    text = json.dumps([candidate.program, candidate.compile_options, candidate.process.to_json()], sort_keys=True,
                      default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class FakeRunner:
    """`time_of(candidate)` -> seconds per call, or a TrialStatus the candidate fails with."""

    time_of: Callable[[Candidate], float | TrialStatus]
    wrong_on_second_inputs: Callable[[Candidate], bool] = lambda candidate: False
    exe_of: Callable[[Candidate], str] = executable  # candidates with one executable are duplicates
    passes: list[str] = field(default_factory=list)  # what `passes_that_ran` reports
    autotune_text: str = ""  # what `autotune_results` reports (a recorded GPU file, or none as on CPU)
    jitter: float = 0.01
    drift: float = 0.0  # each sample is this much slower than the one before it (of any build), relatively
    # How much faster than it is a candidate reads in the search and its re-timing (not side by side):
    # a process setup's factor measured on a lucky pair of processes lifts every config holding it.
    misread: Callable[[Candidate], float] = lambda candidate: 1.0
    # Side by side, the fresh workers of a process setup run their builds this much slower and faster
    # than the default's worker, by turns, one factor a worker: a setup's error across pairs of
    # processes. Placements are then `timing.setup_pairs`, as `ProcessRunner.interleave` makes them.
    worker_spread: float = 0.0
    # How much faster than it is a candidate reads side by side (`interleave`) and not in confirmation:
    # the few pairs of processes a setup is re-measured on.
    misread_beside: Callable[[Candidate], float] = lambda candidate: 1.0
    # Seconds per call of a build deployed as called (the user's step, its host work included); None:
    # the workload has no source to call it from (`can_call_as_user`).
    as_called: Callable[[Candidate], float] | None = None
    budget: Budget = field(default_factory=Budget)
    # What the tuning layer asked, in order: ("build" | "measure" | "verify" | "place" | "place-as-called", build id),
    # and ("setups-as-called", "") where it asked for setups' factors as called (`measure_setups_as`).
    calls: list[tuple[str, str]] = field(default_factory=list)
    deadlines: tuple[float, float] | None = None
    node: str = "fake-node"
    _rng: random.Random = field(default_factory=lambda: random.Random(0))
    _taken: int = 0  # samples taken so far
    _placements: int = 0  # placements made so far

    def slots(self) -> list[FakeRunner]:
        return [self]

    def losses(self) -> list[str]:
        return []

    def _samples(self, candidate: Candidate, count: int, as_called: bool = False) -> list[float]:
        seconds = self.as_called(candidate) if as_called and self.as_called else self.time_of(candidate)
        assert isinstance(seconds, float)
        samples = []
        for _ in range(count):
            self._taken += 1  # a machine that slows down as it works (`drift`) slows every build alike
            samples.append(seconds * (1.0 + self.drift * self._taken) * (1.0 + self._rng.gauss(0.0, self.jitter)))
        return samples

    def start(self) -> None:
        outcome = self.time_of(Candidate())
        assert isinstance(outcome, float), "the default of a FakeRunner must run"

    def set_deadlines(self, compile_s: float, measure_s: float) -> None:
        self.deadlines = (compile_s, measure_s)

    def build(self, id: str, candidate: Candidate, *, is_default: bool = False) -> Compiled | Failed:
        self.calls.append(("build", id))
        outcome = self.time_of(candidate)
        if outcome is TrialStatus.COMPILE_ERROR:
            return Failed(TrialStatus.COMPILE_ERROR, "the fake compiler refused it")
        return Compiled(0.01, self.exe_of(candidate), {"fake": True}, cached=False)

    def measure(self, id: str, candidate: Candidate, tolerance: Tolerance, timing: TimingPolicy, *,
                is_default: bool = False, race: Race | None = None) -> Timed | Failed:
        self.calls.append(("measure", id))
        outcome = self.time_of(candidate)
        if outcome is TrialStatus.WRONG_RESULT:
            check = Check(False, 1.0, 1.0, "output 0: the fake says it differs")
            return Failed(TrialStatus.WRONG_RESULT, check.mismatch, check)
        if isinstance(outcome, TrialStatus):
            return Failed(outcome, f"the fake {outcome.value}")
        if is_default:
            samples = self._samples(candidate, timing.samples)
            median, low, high = median_ci(samples, seed=timing.seed)
            return Timed(tuple(samples), 1, median, (low, high), sum(samples), False, Check(True, 0.0, 0.0))
        # Paired with the default, as `ProcessRunner` times a candidate.
        lift = self.misread(candidate)
        pairs = paired(lambda: self._samples(candidate, 1)[0] / lift, lambda: self._samples(Candidate(), 1)[0],
                       timing, race)
        median, low, high = median_ci(list(pairs.samples), seed=timing.seed)
        return Timed(pairs.samples, 1, median, (low, high), sum(pairs.samples) + sum(pairs.reference), pairs.raced,
                     Check(True, 0.0, 0.0), pairs.reference)

    def release(self, id: str, candidate: Candidate) -> None:
        pass

    def verify(self, id: str, candidate: Candidate, tolerance: Tolerance, repeats: int = 1,
               input_set: InputSet = InputSet.VERIFY) -> Verified | Failed:
        self.calls.append(("verify", id))
        if input_set is InputSet.VERIFY and self.wrong_on_second_inputs(candidate):
            check = Check(False, 1.0, 1.0, "output 0 on make_inputs(1): the fake says it differs")
            return Failed(TrialStatus.WRONG_RESULT, check.mismatch, check)
        return Verified(Check(True, 0.0, 0.0))

    def interleave(self, builds: list[tuple[str, Candidate]], rounds: int, timing: TimingPolicy,
                   deploy: Deployment | None = None) -> Pairs | None:
        setups = any(candidate.process.runtime for _, candidate in builds)
        placements = timing.setup_pairs if setups and self.worker_spread else 1
        pairs: Pairs = {}
        for _ in range(placements):
            placement = self.place(builds, timing, deploy)
            if DEFAULT_ID in placement.failed:
                return None
            placement.lift = self.misread_beside
            for _ in range(-(-rounds // placements)):
                for id, pair in placement.sample_pairs(random.Random(0)).items():
                    pairs.setdefault(id, []).append(pair)
        return pairs

    def place(self, builds: list[tuple[str, Candidate]], timing: TimingPolicy,
              deploy: Deployment | None = None) -> FakePlacement:
        self.calls += [("place-as-called" if deploy and deploy.as_called else "place", id) for id, _ in builds]
        placed, failed = {}, {}
        for id, candidate in builds:
            outcome = self.time_of(candidate)
            if isinstance(outcome, TrialStatus):
                failed[id] = f"{outcome.value}: the fake"
            else:
                placed[id] = candidate
        self._placements += 1
        factors = {c.process: 1.0 + self.worker_spread * (-1) ** self._placements
                   for c in placed.values() if c.process.runtime and self.worker_spread}
        return FakePlacement(self, placed, failed, bool(deploy and deploy.as_called), factors)

    def measure_setups_as(self, deploy: Deployment) -> None:
        self.calls.append(("setups-as-called" if deploy.as_called else "setups-deployed", ""))

    def can_call_as_user(self) -> bool:
        return self.as_called is not None

    def passes_that_ran(self, candidate: Candidate) -> list[str]:
        return list(self.passes)

    def autotune_results(self, candidate: Candidate) -> str:
        return self.autotune_text

    def discard(self, candidate: Candidate) -> None:
        pass

    def pids(self) -> list[int]:
        return []

    def close(self) -> None:
        pass


@dataclass
class FakePlacement:
    runner: FakeRunner
    candidates: dict[str, Candidate]
    failed: dict[str, str]
    as_called: bool = False
    factors: dict[ProcessSetup, float] = field(default_factory=dict)  # each setup worker's (`worker_spread`)
    lift: Callable[[Candidate], float] = lambda candidate: 1.0  # side by side: `FakeRunner.misread_beside`

    def sample_pairs(self, shuffle: random.Random) -> dict[str, tuple[float, float]]:
        for candidate in self.candidates.values():
            if self.runner.time_of(candidate) is TrialStatus.CRASH:
                raise WorkerFailure(TrialStatus.CRASH, "the fake worker died")
        default = self.candidates[DEFAULT_ID]
        return {id: (self.runner._samples(default, 1, self.as_called)[0],
                     self.runner._samples(candidate, 1, self.as_called)[0] * self.factors.get(candidate.process, 1.0)
                     / self.lift(candidate))
                for id, candidate in self.candidates.items() if id != DEFAULT_ID}


def fake_runner_factory(runner: FakeRunner) -> Callable[..., AbstractContextManager[FakeRunner]]:
    """What `xtat.tune(runner=...)` takes: opens the same fake for every run."""

    @contextmanager
    def open_runner(captured: object, settings: object, **_: object) -> Iterator[FakeRunner]:
        yield runner

    return open_runner


class MemoryStore:
    """A TEST DOUBLE of `store.base.Storage`, in memory: what a tuning run needs of a store, with
    the SQLite store's semantics (one trial per config key; a trial left running is reclaimed;
    the newest result is in force). It shows the run needs nothing of SQLite."""

    def __init__(self) -> None:
        self.where = ":memory:"
        self._workloads: list[WorkloadRecord] = []
        self._runs: dict[int, dict] = {}
        self._trials: list[Trial] = []
        self._results: list[Result] = []
        self._claims: dict[int, tuple[str | None, float]] = {}  # trial id -> (owner, lease until)
        self._locks: dict[str, tuple[str, float]] = {}
        self._facts: dict[str, dict] = {}

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        pass

    def upsert_workload(self, fingerprint: str, program: str, name: str, env: dict, info: dict) -> int:
        known = self.workload(fingerprint)
        if known is None:
            known = WorkloadRecord(len(self._workloads) + 1, fingerprint, program, name, env, info)
            self._workloads.append(known)
        return known.id

    def workload(self, fingerprint: str) -> WorkloadRecord | None:
        return next((w for w in self._workloads if w.fingerprint == fingerprint), None)

    def workloads(self) -> list[WorkloadRecord]:
        return list(self._workloads)

    def workloads_of_program(self, program: str) -> list[WorkloadRecord]:
        return [w for w in self._workloads if w.program == program]

    def find_workload(self, name_or_fingerprint: str) -> WorkloadRecord:
        found = [w for w in self._workloads if name_or_fingerprint in (w.name, w.fingerprint)
                 or w.fingerprint.startswith(name_or_fingerprint)]
        if len(found) != 1:
            raise UserError(f"{len(found)} workloads match {name_or_fingerprint!r} in the memory store")
        return found[0]

    def is_new(self) -> bool:
        return not self._workloads

    def machine_fact(self, key: str) -> dict | None:
        return self._facts.get(key)

    def set_machine_fact(self, key: str, value: dict) -> None:
        self._facts[key] = value

    def mark_rejected(self, result_id: int, reason: str, env: dict) -> None:
        index = result_id - 1
        result = self._results[index]
        rejected = (*result.detail.rejected_at_apply, Rejection(reason, env, time.time()))
        self._results[index] = dataclasses.replace(
            result, detail=dataclasses.replace(result.detail, rejected_at_apply=rejected))

    def begin_run(self, workload_id: int, settings: dict, owner: str | None = None, lease_s: float = 60.0) -> int:
        self._runs[len(self._runs) + 1] = {"settings": settings, "status": RunStatus.SEARCHING}
        return len(self._runs)

    def set_run_status(self, run_id: int, status: RunStatus) -> None:
        self._runs[run_id]["status"] = status

    def finish_run(self, run_id: int, status: RunStatus = RunStatus.FINISHED) -> None:
        self._runs[run_id]["status"] = status

    def run_settings(self, run_id: int | None) -> dict | None:
        return self._runs[run_id]["settings"] if run_id in self._runs else None

    def trial(self, workload_id: int, key: str) -> Trial | None:
        return next((t for t in self._trials if t.workload_id == workload_id and t.config_key == key), None)

    def trials(self, workload_id: int) -> list[Trial]:
        return [t for t in self._trials if t.workload_id == workload_id]

    def start_trial(self, workload_id: int, run_id: int | None, config: dict, key: str,
                    owner: str | None = None, lease_s: float = 60.0) -> int | None:
        known = self.trial(workload_id, key)
        if known is not None:
            holder, until = self._claims.get(known.id, (None, 0.0))
            if known.status is not TrialStatus.RUNNING or (holder != owner and until > time.time()):
                return None
            self._claims[known.id] = (owner, time.time() + lease_s)
            return known.id
        self._trials.append(Trial(len(self._trials) + 1, workload_id, run_id, config, TrialStatus.RUNNING, None, None,
                                  None, None, None, None, None, None, None, None, None, None, created_at=time.time()))
        self._claims[len(self._trials)] = (owner, time.time() + lease_s)
        return len(self._trials)

    def renew(self, owner: str, lease_s: float) -> int:
        held = [id for id, (holder, _) in self._claims.items() if holder == owner]
        for id in held:
            self._claims[id] = (owner, time.time() + lease_s)
        return len(held)

    def claimed_elsewhere(self, workload_id: int, owner: str) -> list[Trial]:
        return [t for t in self.trials(workload_id) if t.status is TrialStatus.RUNNING
                and self._claims.get(t.id, (owner, 0.0))[0] != owner and self._claims[t.id][1] > time.time()]

    def try_lock(self, name: str, owner: str, lease_s: float) -> bool:
        holder, until = self._locks.get(name, (owner, 0.0))
        if holder != owner and until > time.time():
            return False
        self._locks[name] = (owner, time.time() + lease_s)
        return True

    def unlock(self, name: str, owner: str) -> None:
        if self._locks.get(name, (None, 0.0))[0] == owner:
            del self._locks[name]

    def finish_trial(self, trial_id: int, outcome: TrialOutcome) -> None:
        columns = outcome.columns()
        metrics, mismatches, lost_nodes = unpacked_metrics(columns.pop("metrics"))
        self._replace(trial_id, **{**columns, "status": TrialStatus(outcome.status), "metrics": metrics,
                                   "mismatches": mismatches, "lost_nodes": lost_nodes})

    def retime_trial(self, trial_id: int, timing: Timing, search_pairs: int) -> None:
        metrics = next(t.metrics for t in self._trials if t.id == trial_id)
        self._replace(trial_id, **timing.columns(), metrics={**(metrics or {}), "search_pairs": search_pairs})

    def demote_trial(self, trial_id: int, error: str, status: TrialStatus = TrialStatus.WRONG_RESULT) -> None:
        self._replace(trial_id, status=status, error=error)

    def _replace(self, trial_id: int, **fields: object) -> None:
        self._claims.pop(trial_id, None)
        index = next(i for i, t in enumerate(self._trials) if t.id == trial_id)
        self._trials[index] = dataclasses.replace(self._trials[index], **fields)  # type: ignore[arg-type]

    def measured_with_hash(self, workload_id: int, exe_hash: str, asking_id: int) -> Trial | None:
        return next((t for t in self.trials(workload_id) if t.exe_hash == exe_hash and t.same_as is None
                     and t.status not in (TrialStatus.RUNNING, TrialStatus.DUPLICATE) and t.id != asking_id), None)

    def add_result(self, workload_id: int, run_id: int | None, adopted: bool, config: dict,
                   default_s: float | None, best_s: float | None, speedup: tuple[float, float, float] | None,
                   detail: ResultDetail) -> int:
        median, low, high = speedup if speedup else (None, None, None)
        self._results.append(Result(len(self._results) + 1, workload_id, run_id, adopted, config, default_s, best_s,
                                    median, low, high, detail, time.time()))
        return len(self._results)

    def latest_result(self, workload_id: int) -> Result | None:
        return next((r for r in reversed(self._results) if r.workload_id == workload_id), None)

    def results(self, workload_id: int) -> list[Result]:
        return [r for r in self._results if r.workload_id == workload_id]


def _store_stands_in(store: MemoryStore) -> TuningStorage:
    """Checked by mypy (the test command): the double has its interface's every method and signature."""
    return store


def _runner_stands_in(runner: FakeRunner) -> Runner:
    """As above, for the runner."""
    return runner
