"""Test doubles of the roles. `FakeRunner` is a TEST DOUBLE of `runner.base.Runner`: it compiles
nothing and times nothing. Each candidate's "time" comes from a function the test gives, with a
seeded 1% jitter per sample; its executable is named by its config, so configs that the stages
make into the same candidate are duplicates, as in real builds. It lets the loop, racing,
deduplication and adoption be tested in seconds."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from xtat.candidate import Candidate
from xtat.runner.base import WorkerFailure
from xtat.runner.protocol import Check, Compiled, Failed, Timed, Verified
from xtat.runner.timing import Race, TimingPolicy, median_ci
from xtat.runner.verify import Budget, Tolerance
from xtat.status import TrialStatus


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
    jitter: float = 0.01
    budget: Budget = field(default_factory=Budget)
    # What the tuning layer asked, in order: ("build" | "measure" | "verify" | "place", build id).
    calls: list[tuple[str, str]] = field(default_factory=list)
    deadlines: tuple[float, float] | None = None
    _rng: random.Random = field(default_factory=lambda: random.Random(0))

    def _samples(self, candidate: Candidate, count: int) -> list[float]:
        seconds = self.time_of(candidate)
        assert isinstance(seconds, float)
        return [seconds * (1.0 + self._rng.gauss(0.0, self.jitter)) for _ in range(count)]

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
        samples: list[float] = []
        raced = False
        while len(samples) < timing.samples and not raced:
            samples += self._samples(candidate, 1)
            raced = race is not None and len(samples) < timing.samples and race.lost(samples)
        median, low, high = median_ci(samples, seed=timing.seed)
        return Timed(tuple(samples), 1, median, (low, high), sum(samples), raced, Check(True, 0.0, 0.0))

    def release(self, id: str, candidate: Candidate) -> None:
        pass

    def verify(self, id: str, candidate: Candidate, tolerance: Tolerance, repeats: int = 1,
               input_set: str = "verify") -> Verified | Failed:
        self.calls.append(("verify", id))
        if input_set == "verify" and self.wrong_on_second_inputs(candidate):
            check = Check(False, 1.0, 1.0, "output 0 on make_inputs(1): the fake says it differs")
            return Failed(TrialStatus.WRONG_RESULT, check.mismatch, check)
        return Verified(Check(True, 0.0, 0.0))

    def interleave(self, builds: list[tuple[str, Candidate]], rounds: int,
                   timing: TimingPolicy) -> dict[str, list[float]]:
        placement = self.place(builds, timing)
        samples: dict[str, list[float]] = {id: [] for id in placement.candidates}
        for _ in range(rounds):
            for id, seconds in placement.sample_round(random.Random(0)).items():
                samples[id].append(seconds)
        return samples

    def place(self, builds: list[tuple[str, Candidate]], timing: TimingPolicy,
              deploy_tolerance: Tolerance | None = None) -> FakePlacement:
        self.calls += [("place", id) for id, _ in builds]
        placed, failed = {}, {}
        for id, candidate in builds:
            outcome = self.time_of(candidate)
            if isinstance(outcome, TrialStatus):
                failed[id] = f"{outcome.value}: the fake"
            else:
                placed[id] = candidate
        return FakePlacement(self, placed, failed)

    def passes_that_ran(self, candidate: Candidate) -> list[str]:
        return list(self.passes)

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

    def sample_round(self, shuffle: random.Random) -> dict[str, float]:
        for candidate in self.candidates.values():
            if self.runner.time_of(candidate) is TrialStatus.CRASH:
                raise WorkerFailure(TrialStatus.CRASH, "the fake worker died")
        return {id: self.runner._samples(candidate, 1)[0] for id, candidate in self.candidates.items()}


def fake_runner_factory(runner: FakeRunner):
    """What `xtat.tune(runner=...)` takes: opens the same fake for every run."""

    @contextmanager
    def open_runner(captured, settings, **_: object) -> Iterator[FakeRunner]:
        yield runner

    return open_runner
