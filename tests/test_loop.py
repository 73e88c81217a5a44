"""The search loop, racing, deduplication and adoption on `FakeRunner`, a test double of the
runner (tests/support/doubles.py): the decisions are real, the times are the test's. Seconds in all."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import pytest

import xtat
from doubles import FakeRunner, MemoryStore, fake_runner_factory
from tiny import FAST, mlp, tiny_mlp
from xtat.core.candidate import Candidate
from xtat.core.space import config_key
from xtat.core.status import TrialStatus
from xtat.runner.base import WorkerFailure
from xtat.search import STRATEGIES
from xtat.store.sql import Store
from xtat.tuning.result import AdoptionOutcome

WIDTH = "xla_cpu_prefer_vector_width"
LEVEL = "xla_backend_optimization_level"
DEFAULT_S = 1e-3


def tune(db, runner: FakeRunner, **settings):
    options = {**FAST, "stages": ("codegen",), "budget": 60, **settings}
    return xtat.tune(tiny_mlp(), db=db, runner=fake_runner_factory(runner), **options)


def faster_with(option: str, value: object, speedup: float):
    return lambda c: DEFAULT_S / speedup if c.compile_options.get(option) == value else DEFAULT_S


def trials(db):
    store = Store.open(db)
    try:
        return store.trials(store.workloads()[0].id)
    finally:
        store.close()


def test_a_faster_config_is_found_confirmed_and_adopted(db):
    runner = FakeRunner(faster_with(WIDTH, 512, 2.0))
    result = tune(db, runner)
    assert result.adopted, result.message
    assert result.best_config["codegen"][WIDTH] == 512  # with whatever neutral decisions noise favoured
    assert 1.8 < result.speedup < 2.2 and result.speedup_ci[0] > 1.02
    assert result.confirmation.verdict.value == "faster" and result.confirmed.config == result.best_config
    # The default is built and measured first; adoption re-verifies, then deploys both side by side.
    assert runner.calls[:2] == [("build", "default"), ("measure", "default")]
    assert ("verify", next(id for op, id in runner.calls if op == "verify")) in runner.calls
    assert runner.calls[-2:][0][0] == "place" and runner.calls[-2][1] == "default"


def test_a_win_timed_while_the_machine_slows_down_is_found_by_its_paired_figure(db):
    # Every sample is 0.2% slower than the one before: by the time the search reaches the 1.3x config,
    # the machine is several times slower than when the default was timed. Compared with the default's
    # one early measurement it would look slower; paired with the default, it is the 1.3x it is.
    runner = FakeRunner(faster_with(WIDTH, 512, 1.3), drift=0.002)
    result = tune(db, runner)
    won = next(t for t in trials(db) if t.config.get("codegen", {}).get(WIDTH) == 512 and len(t.config["codegen"]) == 1)
    default = next(t for t in trials(db) if not t.config)
    assert won.median_s > 1.3 * default.median_s  # its raw time: slower than the default's early one
    assert 1.25 < won.speedup < 1.35 and won.speedup_low > 1.2  # paired: the win
    assert result.adopted and result.best_config["codegen"][WIDTH] == 512, result.message


@dataclass
class CrashesSideBySide(FakeRunner):
    """TEST DOUBLE: a FakeRunner whose builds that `crashes_side_by_side` picks kill their worker when
    they run side by side (`interleave`), though they ran in the search: the GPT train step's
    `algsimp` and `cse` off together segfaulted so, some of the time."""

    crashes_side_by_side: Callable[[Candidate], bool] = lambda candidate: False

    def interleave(self, builds, rounds, timing, deploy=None):
        for id, candidate in builds:
            if self.crashes_side_by_side(candidate):
                raise WorkerFailure(TrialStatus.CRASH, "worker killed by SIGSEGV (the fake)", build=id)
        return super().interleave(builds, rounds, timing, deploy)


def width_and_level(c: Candidate) -> float:
    """Vector width 512: 1.5x; backend level 2: 1.3x; both: 1.95x."""
    return (DEFAULT_S / (1.5 if c.compile_options.get(WIDTH) == 512 else 1.0)
            / (1.3 if c.compile_options.get(LEVEL) == 2 else 1.0))


def only_the_first_asked() -> tuple[list[dict], Callable[[Candidate], bool]]:
    """A predicate true for the first build but the default it is asked about (and its twins), and a
    list that holds that build's compile options once asked."""
    first: list[dict] = []

    def picked(c: Candidate) -> bool:
        if c != Candidate() and not first:
            first.append(c.compile_options)
        return bool(first) and c.compile_options == first[0]

    return first, picked


def test_a_finalist_that_kills_its_worker_side_by_side_is_demoted_and_the_rest_measured_again(db):
    # The first finalist placed side by side crashes there, and only that one (GPT's `algsimp` and `cse` off).
    first, crashes = only_the_first_asked()
    result = tune(db, CrashesSideBySide(width_and_level, crashes_side_by_side=crashes))
    assert result.adopted and result.best_config["codegen"] != first[0], result.message
    assert result.best_config["codegen"][WIDTH] == 512 and "demoted as crashes" in result.message
    crashed = [t for t in trials(db) if t.status is TrialStatus.CRASH]
    assert [t.config["codegen"] for t in crashed] == [first[0]]
    assert all("worker killed by SIGSEGV" in (t.error or "") for t in crashed)


def test_a_worker_failure_side_by_side_that_is_no_finalists_keeps_the_default_and_demotes_nothing(db):
    runner = CrashesSideBySide(width_and_level, crashes_side_by_side=lambda c: c == Candidate())  # the default's
    result = tune(db, runner)
    assert not result.adopted and result.outcome is AdoptionOutcome.REMEASURE_FAILED
    assert "worker killed by SIGSEGV" in result.message
    assert not any(t.status is TrialStatus.CRASH for t in trials(db))


@dataclass
class CrashesInConfirmation(FakeRunner):
    """TEST DOUBLE: a FakeRunner whose builds that `crashes` picks kill their worker when placed for
    confirmation, though they ran in the search and side by side (GPT's `algsimp` and `cse` off)."""

    crashes: Callable[[Candidate], bool] = lambda candidate: False
    _beside: bool = False  # placing for `interleave` (side by side), not for a confirmation

    def interleave(self, builds, rounds, timing, deploy=None):
        self._beside = True
        try:
            return super().interleave(builds, rounds, timing, deploy)
        finally:
            self._beside = False

    def place(self, builds, timing, deploy=None):
        for id, candidate in builds:
            if not self._beside and self.crashes(candidate):
                raise WorkerFailure(TrialStatus.CRASH, "worker killed by SIGSEGV (the fake)", build=id)
        return super().place(builds, timing, deploy)


def test_a_finalist_that_kills_its_worker_in_confirmation_is_demoted_and_the_next_confirmed(db):
    # The first finalist confirmed dies there, and only that one (GPT's `algsimp` and `cse` off).
    first, crashes = only_the_first_asked()
    result = tune(db, CrashesInConfirmation(width_and_level, crashes=crashes))
    crashed = [t for t in trials(db) if t.status is TrialStatus.CRASH]
    assert [t.config["codegen"] for t in crashed] == [first[0]], [t.config for t in crashed]
    assert "while it was confirmed" in (crashed[0].error or "") and "demoted as crashes" in result.message
    assert result.adopted and result.best_config["codegen"] != first[0], result.message
    assert result.best_config["codegen"][WIDTH] == 512 and result.speedup > 1.4, result.message


def test_a_worker_failure_in_confirmation_that_is_no_finalists_keeps_the_default_and_demotes_nothing(db):
    result = tune(db, CrashesInConfirmation(width_and_level, crashes=lambda c: c == Candidate()))  # the default's
    assert not result.adopted and result.outcome is AdoptionOutcome.CONFIRMATION_FAILED, result.message
    assert not any(t.status is TrialStatus.CRASH for t in trials(db))


def test_a_tie_is_not_adopted(db):
    result = tune(db, FakeRunner(faster_with(WIDTH, 512, 1.005)))
    assert not result.adopted and result.best_config == {}
    assert result.outcome in (AdoptionOutcome.NO_CANDIDATE, AdoptionOutcome.NOT_FASTER, AdoptionOutcome.TIE)


def test_failures_are_recorded_with_their_status_and_the_run_goes_on(db):
    fails = {128: TrialStatus.WRONG_RESULT, 512: TrialStatus.CRASH, 1: TrialStatus.COMPILE_ERROR,
             2: TrialStatus.TIMEOUT}

    def time_of(c: Candidate):
        for option in (WIDTH, LEVEL):
            if c.compile_options.get(option) in fails:
                return fails[c.compile_options[option]]  # a wrong result that would be the fastest
        return DEFAULT_S

    result = tune(db, FakeRunner(time_of))
    by_config = {str(t.config): t.status for t in trials(db)}
    assert by_config[str({"codegen": {WIDTH: 128}})] == TrialStatus.WRONG_RESULT
    assert by_config[str({"codegen": {WIDTH: 512}})] == TrialStatus.CRASH
    assert by_config[str({"codegen": {LEVEL: 1}})] == TrialStatus.COMPILE_ERROR
    assert by_config[str({"codegen": {LEVEL: 2}})] == TrialStatus.TIMEOUT
    assert not result.adopted and sum(result.trials.values()) == 60


def test_an_impossibly_fast_config_is_a_wrong_result(db):
    result = tune(db, FakeRunner(faster_with(WIDTH, 512, 100.0)))
    wrong = [t for t in trials(db) if t.config == {"codegen": {WIDTH: 512}}][0]
    assert wrong.status == TrialStatus.WRONG_RESULT and "impossibly fast" in (wrong.error or "")
    assert not result.adopted


def test_clearly_slower_configs_are_raced_and_never_finalists(db):
    slow = lambda c: 2 * DEFAULT_S if c.compile_options.get(WIDTH) == 128 else DEFAULT_S  # noqa: E731
    tune(db, FakeRunner(slow))
    raced = [t for t in trials(db) if t.config == {"codegen": {WIDTH: 128}}][0]
    assert raced.status == TrialStatus.OK and raced.raced
    assert len(raced.samples or []) == 3 < FAST["samples"]  # stopped at race_min_samples


def test_a_phantom_figure_from_one_lucky_block_is_timed_again_and_the_real_win_it_raced_out_adopted(db):
    # The build with the vector width 128 (alone) runs 2x as fast for its first 20 samples (one lucky
    # block of pairs), then as fast as it is. In the search it is the incumbent, and the real 1.3x win (opt level
    # 2), timed after it, loses its race. Timed again, the phantom is a tie and the win a finalist.
    samples_of: dict[str, int] = {}

    def time_of(c: Candidate) -> float:
        key = repr(sorted(c.compile_options.items()))
        samples_of[key] = samples_of.get(key, 0) + 1
        lucky = c.compile_options == {WIDTH: 128} and samples_of[key] <= 20
        return DEFAULT_S / (1.3 if c.compile_options.get(LEVEL) == 2 else 1.0) / (2.0 if lucky else 1.0)

    result = tune(db, FakeRunner(time_of), finalists=1)
    phantom = next(t for t in trials(db) if t.config == {"codegen": {WIDTH: 128}})
    assert len(phantom.samples or []) == 30  # its search block and the fresh one, both recorded
    assert result.adopted and result.best_config["codegen"].get(LEVEL) == 2, result.message
    assert 1.2 < result.speedup < 1.4


def test_a_shortlisted_config_whose_fresh_block_is_undecided_against_the_tie_margin_is_timed_on(db):
    # A 1.03x win (every config with the vector width 512) under 3% jitter: a block of 15 pairs
    # reads it either side of the 1.02 margin, so, timed again, it is timed on (up to settle_s).
    def run(path: str, settle_s: float) -> list:
        tune(path, FakeRunner(faster_with(WIDTH, 512, 1.03), jitter=0.03), finalists=1, settle_s=settle_s)
        return [t for t in trials(path) if t.config]

    settled = run(str(db), 2.0)
    assert any(len(t.samples or []) > 15 + 15 and t.config["codegen"].get(WIDTH) == 512 for t in settled)
    # with no settle_s, the same run times each shortlisted config again for one block alone
    plain = run(str(db) + ".plain.db", 0.0)
    assert max(len(t.samples or []) for t in plain) == 15 + 15


def test_a_shortlisted_config_that_fails_its_check_when_timed_again_is_demoted(db):
    # The 2x build computes the right answer while the search measures it (its first 18 calls of the
    # fake: build, measure, the warm-up pair and 15 pairs), and a wrong one when timed again.
    calls = [0]

    def time_of(c: Candidate) -> float | TrialStatus:
        if c.compile_options != {WIDTH: 512}:
            return DEFAULT_S
        calls[0] += 1
        return DEFAULT_S / 2 if calls[0] <= 18 else TrialStatus.WRONG_RESULT

    result = tune(db, FakeRunner(time_of), finalists=1)
    demoted = next(t for t in trials(db) if t.config == {"codegen": {WIDTH: 512}})
    assert demoted.status == TrialStatus.WRONG_RESULT and "timed again" in (demoted.error or "")
    assert not result.adopted


def test_a_process_setup_that_adds_no_more_than_the_tie_margin_is_left_out_of_the_adopted_config(db):
    # One CPU makes every build 1.5% faster (inside the tie margin) and the vector width 512 makes it
    # 1.3x faster: the fastest finalist holds both, and side by side is no faster than the width alone
    # beyond the margin, so the width alone is adopted, deployable without `xtat run`.
    def time_of(c: Candidate) -> float:
        width = 1.3 if c.compile_options.get(WIDTH) == 512 else 1.0
        return DEFAULT_S / width / (1.015 if c.process.cpus == 1 else 1.0)

    result = tune(db, FakeRunner(time_of, jitter=0.002), finalists=1, stages=("runtime", "codegen"), options=(WIDTH,))
    assert any(t.config.get("runtime", {}).get("cpus") == 1 and t.config.get("codegen", {}).get(WIDTH) == 512
               for t in trials(db))  # the search measured the two together
    assert result.adopted and result.best_config == {"codegen": {WIDTH: 512}}, (result.best_config, result.message)


def test_a_process_setup_alone_stands_for_a_finalist_whose_rest_adds_no_more_than_the_tie_margin(db):
    # One CPU makes every build 1.12x faster; the vector width 512 adds 1% (inside the tie margin);
    # two host devices make it slower. The fastest finalist holds one CPU and the width; side by
    # side it is no faster than one CPU alone beyond the margin, so one CPU alone is adopted (fewer
    # decisions), though it was never a finalist itself.
    def time_of(c: Candidate) -> float:
        width = 1.01 if c.compile_options.get(WIDTH) == 512 else 1.0
        devices = 1.3 if (c.process.host_devices or 1) > 1 else 1.0
        return DEFAULT_S / width / (1.12 if c.process.cpus == 1 else 1.0) * devices

    result = tune(db, FakeRunner(time_of, jitter=0.002), finalists=1, stages=("runtime", "codegen"),
                  options=(WIDTH,), strategy="grid")
    setup_alone = {"runtime": {"cpus": 1}}
    assert any(t.config == setup_alone for t in trials(db))  # the search timed one CPU alone
    assert result.adopted and result.best_config == setup_alone, (result.best_config, result.message)
    # The one finalist gave way to one CPU alone and is listed as such; beside it were its two parts
    # (the width alone, a tie, is no finalist of its own).
    both = {**setup_alone, "codegen": {WIDTH: 512}}
    by_config = {config_key(f.config): f for f in result.finalists}
    assert sorted(by_config) == sorted(map(config_key, [setup_alone, {"codegen": {WIDTH: 512}}, both])), by_config
    gave_way = by_config[config_key(both)]
    assert gave_way.gave_way_to == by_config[config_key(setup_alone)].trial and not gave_way.confirmed


def width_on_one_cpu(gain: float) -> Callable[[Candidate], float | TrialStatus]:
    """Times where one CPU makes every build 1.12x faster and the vector width 512 adds `gain` to it
    (the width does not build without one CPU); two host devices make it slower."""
    def time_of(c: Candidate) -> float | TrialStatus:
        width = c.compile_options.get(WIDTH) == 512
        if width and c.process.cpus != 1:
            return TrialStatus.COMPILE_ERROR
        devices = 1.3 if (c.process.host_devices or 1) > 1 else 1.0
        return DEFAULT_S / (gain if width else 1.0) / (1.12 if c.process.cpus == 1 else 1.0) * devices

    return time_of


def test_a_finalist_stands_against_its_setup_alone_on_their_speedup_over_each_other(db):
    # One CPU makes every build 1.12x faster and the vector width 512 adds 1.08x to it (the width
    # does not build without one CPU); two host devices make it slower. Side by side the fresh
    # one-CPU workers run 15% slower and faster by turns, so each config's speedup over the
    # default spreads over the pairs of processes; the finalist and one CPU alone share that worker,
    # and over each other they read the width's 1.08x, past the tie margin: the finalist stands.
    runner = FakeRunner(width_on_one_cpu(1.08), jitter=0.002, worker_spread=0.15)
    result = tune(db, runner, finalists=1, stages=("runtime", "codegen"), options=(WIDTH,), strategy="grid")
    both = {"runtime": {"cpus": 1}, "codegen": {WIDTH: 512}}
    assert result.adopted and result.best_config == both, (result.best_config, result.message)
    assert not any(f.gave_way_to for f in result.finalists), result.finalists


def test_a_finalist_stands_against_its_setup_alone_where_it_reads_faster_though_its_interval_reaches_the_margin(db):
    # As above, but the width adds 1.05x and each sample spreads by 6%: over one CPU alone, paired by
    # round, the finalist's median is past the tie margin while its interval reaches into it. The
    # median decides: the width rides along, and the finalist is confirmed against the default.
    result = tune(db, FakeRunner(width_on_one_cpu(1.05), jitter=0.06), finalists=1, stages=("runtime", "codegen"),
                  options=(WIDTH,), strategy="grid")
    both = {"runtime": {"cpus": 1}, "codegen": {WIDTH: 512}}
    by_config = {config_key(f.config): f for f in result.finalists}
    assert config_key(both) in by_config, result.finalists  # the pair was the finalist, one CPU beside it
    assert result.adopted and result.best_config == both, (result.best_config, result.message)


def test_a_clear_win_timed_as_the_search_runs_out_of_time_is_still_combined_with_the_best(db):
    # One CPU and the vector width 512 each make the step 1.2x faster, together 1.44x. The second of
    # the two the sweep times holds the search past its time limit: the sweep had no turn left to
    # combine it with the first, and it is combined once, past the limit.
    seen: set[tuple[bool, bool]] = set()

    def time_of(c: Candidate) -> float:
        one_cpu, wide = c.process.cpus == 1, c.compile_options.get(WIDTH) == 512
        if one_cpu != wide and (one_cpu, wide) not in seen:
            seen.add((one_cpu, wide))
            if len(seen) == 2:
                time.sleep(6.0)  # the search's time (5 s) runs out while this one is measured
        return DEFAULT_S / (1.2 if one_cpu else 1.0) / (1.2 if wide else 1.0)

    result = tune(db, FakeRunner(time_of), budget=None, time_s=5.0, finalists=1, stages=("runtime", "codegen"),
                  options=(WIDTH,))
    both = {"runtime": {"cpus": 1}, "codegen": {WIDTH: 512}}
    measured = [t.config for t in trials(db) if t.status == TrialStatus.OK]
    assert len(seen) == 2 and both in measured, measured
    assert measured[-1] == both, measured  # the one config past the limit
    assert result.adopted and result.best_config == both, (result.best_config, result.message)


@jax.tree_util.register_pytree_node_class
class SlowToFlatten:
    """Weights in a pytree node whose flatten takes 0.2 ms of Python, as a large Flax NNX state's does."""

    def __init__(self, w):
        self.w = w

    def tree_flatten(self):
        until = time.perf_counter() + 2e-4
        while time.perf_counter() < until:
            pass
        return (self.w,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


def test_finalists_are_measured_as_the_step_is_called_where_its_argument_tree_costs_host_time(tmp_path):
    # The width 512 is 1.10x faster as the search times the program (flat arrays) but 0.90x as the
    # user's step is called; level 1 is 1.05x both ways (and no level builds with a width). Where
    # taking the user's argument tree apart takes 0.2 ms of the default's 1 ms call, the finalists
    # are placed and confirmed as called, and level 1 is adopted; where it takes microseconds, they
    # are timed flat, and the width is.
    def factor(c: Candidate, width: float) -> float | TrialStatus:
        if WIDTH in c.compile_options and LEVEL in c.compile_options:
            return TrialStatus.COMPILE_ERROR
        return width if c.compile_options.get(WIDTH) == 512 else 1.05 if c.compile_options.get(LEVEL) == 1 else 1.0

    def time_of(c: Candidate) -> float | TrialStatus:
        f = factor(c, 1.10)
        return f if isinstance(f, TrialStatus) else DEFAULT_S / f

    def as_called(c: Candidate) -> float:
        f = factor(c, 0.90)
        assert not isinstance(f, TrialStatus)
        return 1.2 * DEFAULT_S / f

    plain = tiny_mlp()
    slow = xtat.Workload(lambda state, x: mlp(state.w, x), (SlowToFlatten(plain.args[0]), plain.args[1]),
                         name="slow_to_flatten")
    for workload, adopted, placed in ((slow, {LEVEL: 1}, "place-as-called"), (plain, {WIDTH: 512}, "place")):
        runner = FakeRunner(time_of, jitter=0.002, as_called=as_called)
        # One store each: both trace the same program, and a store keys its trials by the program.
        result = xtat.tune(workload, db=tmp_path / f"{placed}.db", runner=fake_runner_factory(runner),
                           **{**FAST, "stages": ("codegen",), "budget": 60, "finalists": 3,
                              "options": (WIDTH, LEVEL), "strategy": "grid"})
        assert result.adopted and result.best_config == {"codegen": adopted}, (result.best_config, result.message)
        assert {kind for kind, _ in runner.calls if kind.startswith("place")} == {placed}
        if placed == "place-as-called":  # a setup's factor too, asked once the default is timed
            assert runner.calls.index(("measure", "default")) < runner.calls.index(("setups-as-called", ""))
        else:
            assert ("setups-as-called", "") not in runner.calls
        assert ("as called" in result.message) is (placed == "place-as-called"), result.message


def test_configs_lifted_by_a_lucky_setup_factor_leave_a_finalist_place_to_a_real_win_without_one(db):
    # One CPU does nothing, but its factors were measured on lucky pairs of processes: every config
    # holding it (alone or with two host devices) reads 1.20x in the search and when timed again,
    # and 1.0x side by side (further ahead of the width than the kinds' reach, `KIND_REACH`). The
    # vector width 512 is a real 1.05x (it does not build with one CPU).
    # Configs with a setup take at most half the shortlist's and the finalists' places: the width
    # takes one of the two finalists', and is adopted.
    def time_of(c: Candidate) -> float | TrialStatus:
        width = c.compile_options.get(WIDTH) == 512
        if width and c.process.cpus == 1:
            return TrialStatus.COMPILE_ERROR
        return DEFAULT_S / (1.05 if width else 1.0)

    runner = FakeRunner(time_of, jitter=0.003, misread=lambda c: 1.20 if c.process.cpus == 1 else 1.0)
    result = tune(db, runner, finalists=2, stages=("runtime", "codegen"), options=(WIDTH, LEVEL), strategy="grid")
    lifted = [t for t in trials(db) if t.status == TrialStatus.OK and t.config.get("runtime", {}).get("cpus") == 1]
    assert len(lifted) >= 3 and all(t.speedup > 1.05 for t in lifted)  # they outrank the width in the search
    assert result.adopted, result.message
    assert result.best_config["codegen"][WIDTH] == 512 and "runtime" not in result.best_config, result.best_config
    setups = [f.config["runtime"] for f in result.finalists if f.config.get("runtime") and f.gave_way_to is None]
    assert len(setups) <= 1, result.finalists  # one place with a setup (it may give way to a part, listed)


def test_the_fastest_config_with_a_setup_holds_a_finalist_place_near_configs_without_one(db):
    # The width and the level do nothing, but without a setup read 1.30x in the search and when
    # timed again (a phantom that a block of pairs in one worker can show); one CPU is a real 1.25x that reads
    # 1.20x there. The configs without a setup would take both finalists' places on their figures;
    # one CPU is within the kinds' reach (`KIND_REACH`) of them, so it holds one, and is adopted.
    def time_of(c: Candidate) -> float | TrialStatus:
        if c.compile_options and c.process.cpus == 1:
            return TrialStatus.COMPILE_ERROR
        return DEFAULT_S / (1.25 if c.process.cpus == 1 else 1.0)

    runner = FakeRunner(time_of, jitter=0.003,
                        misread=lambda c: 0.96 if c.process.cpus == 1 else 1.0 if c.process else 1.3)
    result = tune(db, runner, finalists=2, stages=("runtime", "codegen"), options=(WIDTH, LEVEL), strategy="grid")
    phantoms = [t for t in trials(db) if t.status == TrialStatus.OK and list(t.config) == ["codegen"]]
    assert len(phantoms) >= 2 and all(t.speedup > 1.25 for t in phantoms)  # they outrank one CPU
    assert result.adopted, result.message
    assert result.best_config["runtime"]["cpus"] == 1 and "codegen" not in result.best_config, result.best_config


@pytest.mark.parametrize("one_cpu, lift, adopted", [(1.12, 1.16, {"codegen": {WIDTH: 512}}),
                                                   (1.30, 1.0, {"runtime": {"cpus": 1}}),
                                                   (1.27, 1.0, {"codegen": {WIDTH: 512}})])
def test_a_finalist_of_the_other_kind_near_the_fastest_is_confirmed_too_and_a_tie_goes_to_no_setup(
        db, one_cpu, lift, adopted):
    # The width 512, without a setup, is a real 1.25x and reads so; two host devices are slower. One
    # CPU reads 1.27-1.30x in the search and side by side: a real 1.12x that its few pairs of processes
    # lift, or a real 1.30x or 1.27x. It leads side by side, and the width is within the kinds' reach
    # of it: both are confirmed, then head to head, and one CPU is adopted only where it is faster
    # than the width beyond the tie margin (1.30 / 1.25; 1.27 / 1.25 is within it).
    def time_of(c: Candidate) -> float | TrialStatus:
        if c.process and c.compile_options:
            return TrialStatus.COMPILE_ERROR
        devices = 1.3 if (c.process.host_devices or 1) > 1 else 1.0
        return DEFAULT_S / (one_cpu if c.process.cpus == 1 else 1.25 if c.compile_options.get(WIDTH) == 512
                            else 1.0) * devices

    def misread(c: Candidate) -> float:
        return lift if c.process.cpus == 1 else 1.0

    runner = FakeRunner(time_of, jitter=0.003, misread=misread, misread_beside=misread)
    result = tune(db, runner, finalists=2, stages=("runtime", "codegen"), options=(WIDTH,), strategy="grid")
    confirmed = [f.config for f in result.finalists if f.confirmed]
    assert {"runtime": {"cpus": 1}} in confirmed and {"codegen": {WIDTH: 512}} in confirmed, result.finalists
    head = next(f.head_to_head for f in result.finalists if f.config == {"runtime": {"cpus": 1}})
    assert head is not None and head.speedup == pytest.approx(one_cpu / 1.25, rel=0.01), head
    assert result.adopted and result.best_config == adopted, (result.best_config, result.message)


def test_a_config_with_the_default_executable_is_a_duplicate_and_a_no_op(db):
    runner = FakeRunner(lambda c: DEFAULT_S,
                        exe_of=lambda c: "same" if c.compile_options.get(WIDTH) else repr(c.compile_options))
    result = tune(db, runner)
    twins = [t for t in trials(db) if WIDTH in t.config.get("codegen", {})]
    default = [t for t in trials(db) if not t.config][0]
    assert twins and all(t.status == TrialStatus.DUPLICATE for t in twins[1:])
    assert any(WIDTH in name for name in result.no_ops) or twins[0].same_as in (None, default.id)


def test_a_finalist_wrong_on_the_second_inputs_is_demoted(db):
    runner = FakeRunner(faster_with(WIDTH, 512, 2.0),
                        wrong_on_second_inputs=lambda c: c.compile_options.get(WIDTH) == 512)
    result = tune(db, runner)
    assert result.outcome is AdoptionOutcome.DEMOTED and not result.adopted
    demoted = [t for t in trials(db) if t.status == TrialStatus.WRONG_RESULT]
    assert demoted and all(t.config["codegen"][WIDTH] == 512 for t in demoted)


def test_a_rerun_measures_nothing_new_and_keeps_the_decision(db):
    first = tune(db, FakeRunner(faster_with(WIDTH, 512, 2.0)))
    runner = FakeRunner(faster_with(WIDTH, 512, 2.0))
    again = tune(db, runner)
    assert again.new_trials == 0 and again.adopted == first.adopted and again.recorded
    assert not [call for call in runner.calls if call[0] in ("build", "measure")]


@pytest.mark.parametrize("strategy", ["random", "evolution", "model"])
def test_other_strategies_find_the_faster_config(db, strategy):
    result = tune(db, FakeRunner(lambda c: DEFAULT_S / (1.5 if c.compile_options.get(WIDTH) == 512 else 1.0)
                                 / (1.3 if c.compile_options.get(LEVEL) == 2 else 1.0)),
                  strategy=strategy, budget=40)
    assert result.adopted and result.speedup > 1.25, result.message


def test_a_run_needs_nothing_of_sqlite_from_its_store():
    store = MemoryStore()
    result = xtat.tune(tiny_mlp(), db=store, runner=fake_runner_factory(FakeRunner(faster_with(WIDTH, 512, 2.0))),
                       **{**FAST, "stages": ("codegen",), "budget": 60})
    assert result.adopted and result.best_config["codegen"][WIDTH] == 512
    workload = store.workloads()[0].id
    assert store.latest_result(workload).adopted and len(store.trials(workload)) == 60
    again = xtat.tune(tiny_mlp(), db=store, runner=fake_runner_factory(FakeRunner(faster_with(WIDTH, 512, 2.0))),
                      **{**FAST, "stages": ("codegen",), "budget": 60})
    assert again.new_trials == 0 and again.recorded


@dataclass
class Workers(FakeRunner):
    """A FakeRunner whose search candidates are measured by `count` slots at once (a cluster's workers),
    each taking `seconds` per measurement; notes the most measurements ever in flight together."""

    count: int = 4
    seconds: float = 0.02
    in_flight: int = 0
    most: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def slots(self) -> list[FakeRunner]:
        return [_Slot(self, self.time_of, node=f"node-{i}") for i in range(self.count)]


@dataclass
class _Slot(FakeRunner):
    workers: Workers | None = None

    def __init__(self, workers: Workers, time_of, node: str):
        super().__init__(time_of, node=node)
        self.workers = workers

    def measure(self, *args, **kwargs):
        w = self.workers
        with w.lock:
            w.in_flight += 1
            w.most = max(w.most, w.in_flight)
        time.sleep(w.seconds)
        try:
            return super().measure(*args, **kwargs)
        finally:
            with w.lock:
                w.in_flight -= 1


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_keeps_several_workers_busy_with_configs_asked_while_others_are_pending(strategy):
    """Batches: the loop asks for more configs while others are measured; no config is measured twice,
    each trial records its worker's node, and the run ends (a strategy never waits forever)."""
    runner = Workers(faster_with(WIDTH, 512, 1.5))
    store = MemoryStore()
    narrow = {"options": (WIDTH, LEVEL), "budget": 40} if strategy == "grid" else {}  # grid: the whole space
    result = xtat.tune(tiny_mlp(), db=store, runner=fake_runner_factory(runner),
                       **{**FAST, "stages": ("codegen",), "budget": 16, "strategy": strategy, **narrow})
    recorded = store.trials(store.workloads()[0].id)
    assert len({t.config_key for t in recorded}) == len(recorded) <= 40
    assert sum(result.trials.values()) == len(recorded) >= 8
    assert runner.most >= 2, "never two configs measured at once"
    assert runner.most <= runner.count
    assert {t.node for t in recorded} <= {f"node-{i}" for i in range(runner.count)}
    assert len({t.node for t in recorded}) >= 2


def test_time_is_the_search_wall_time_whatever_the_number_of_workers():
    """Issue 33: `--time` is wall time. Four workers of 0.25 s per measurement fill 2 s with about
    thirty configs; counting their trials' times, as one worker's, would stop after about eight."""
    runner = Workers(faster_with(WIDTH, 512, 1.5), count=4, seconds=0.25)
    store = MemoryStore()
    started = time.perf_counter()
    result = xtat.tune(tiny_mlp(), db=store, runner=fake_runner_factory(runner),
                       **{**FAST, "stages": ("codegen",), "budget": None, "time_s": 2.0, "strategy": "random"})
    searched = sum(result.trials.values())
    assert searched > 2 * 2.0 / 0.25, result.trials  # more than two workers' worth: the four ran side by side
    assert time.perf_counter() - started < 2.0 + 5.0  # and it stopped near its wall-time budget


@dataclass
class SlowRounds(FakeRunner):
    """A FakeRunner whose search measurements take `seconds` of wall time, and whose placed builds take
    `round_s` a round, as a confirmation's fresh processes do."""

    seconds: float = 0.1
    round_s: float = 0.1

    def measure(self, *args, **kwargs):
        time.sleep(self.seconds)
        return super().measure(*args, **kwargs)

    def place(self, builds, timing, deploy=None):
        placement = super().place(builds, timing, deploy)
        sample_pairs = placement.sample_pairs

        def slowly(shuffle):
            time.sleep(self.round_s)
            return sample_pairs(shuffle)

        placement.sample_pairs = slowly  # type: ignore[method-assign]
        return placement


def test_a_whole_call_limit_ends_the_search_early_and_cuts_a_confirmation_that_has_not_decided():
    """Standard effort's 5 minutes are the whole call's (`run_time_s`): the search stops with the
    decision's share of the limit left (`DECIDE_SHARE`), and a confirmation still undecided at the
    limit ends there, inconclusive, adopting nothing. Here every config reads 1.5x in the search and
    side by side, and the tie margin's 1.02x in confirmation, which a look or two does not decide."""
    from xtat.tuning.settings import DECIDE_SHARE

    runner = SlowRounds(lambda c: DEFAULT_S / 1.02 if c.compile_options else DEFAULT_S,
                        misread=lambda c: 1.5, misread_beside=lambda c: 1.5)
    limit = 10.0
    started = time.monotonic()
    result = xtat.tune(tiny_mlp(), db=MemoryStore(), runner=fake_runner_factory(runner),
                       **{**FAST, "stages": ("codegen",), "budget": None, "run_time_s": limit, "confirm_looks": 50,
                          "confirm_time_s": 600.0, "rounds": 21})
    wall = time.monotonic() - started
    assert result.time_split.search_s < (1 - DECIDE_SHARE) * limit + 1.0  # the decision's share left (a trial ends)
    confirmation = result.confirmed.confirmation if result.confirmed else None
    assert confirmation is not None and confirmation.cut_by_run_limit, result.message
    assert not result.adopted and "time limit" in result.message
    assert 1 <= confirmation.looks < 50
    assert wall < limit + 21 * 0.1 + 2.0  # past the limit by at most a look


def test_an_inconclusive_confirmation_says_whether_its_interval_straddles_the_margin_or_awaits_looks():
    """A setup's confirmation cut by the run's limit before its fresh pairs were all looked at can
    hold an interval past the margin; its message must not say the interval straddles it."""
    from xtat.tuning.adoption import AdoptionOutcome, judge
    from xtat.tuning.confirmation import Confirmation, Verdict
    from xtat.tuning.settings import TuneSettings

    def inconclusive(low: float, high: float, looks_for_a_verdict: int = 3) -> Confirmation:
        return Confirmation(Verdict.INCONCLUSIVE, 1.189, (low, high), 1e-3, (1e-3, 1e-3), 8e-4, (8e-4, 8e-4),
                            42, 2, 0.99, None, False, cut_by_run_limit=True, looks_for_a_verdict=looks_for_a_verdict)

    settings = TuneSettings()
    outcome, above = judge(inconclusive(1.079, 1.430), settings)
    assert outcome is AdoptionOutcome.INCONCLUSIVE
    assert "straddles" not in above and "lies above 1.02" in above and "needs 3 looks" in above, above
    assert "2 were taken" in above and "time limit" in above, above
    _, straddling = judge(inconclusive(0.990, 1.430), settings)
    assert "the interval straddles 1.02" in straddling, straddling
    # A record written before the field: no verdict was withheld, whatever its interval.
    stored = inconclusive(1.079, 1.430).to_json()
    del stored["looks_for_a_verdict"]
    assert Confirmation.from_json(stored).looks_for_a_verdict == 1


def test_a_rival_or_head_to_head_confirmation_starts_only_with_room_for_two_looks_before_the_limit():
    """`room_for`: another confirmation starts only while the run's limit leaves two looks of the
    leader's length (one look rarely decides, and one cut short adopts nothing); always without a limit."""
    from types import SimpleNamespace

    from xtat.tuning.adoption import room_for

    def run_with(left_s: float | None):
        deadline = None if left_s is None else time.monotonic() + left_s
        return SimpleNamespace(time_left=lambda: None if deadline is None else deadline - time.monotonic())

    assert room_for(run_with(30.0), look_s=10.0) and not room_for(run_with(15.0), look_s=10.0)
    assert not room_for(run_with(-1.0), look_s=0.5) and room_for(run_with(None), look_s=1e9)


def test_a_tuner_decides_when_its_own_configs_are_measured_not_when_a_larger_budget_is_spent(db):
    """Issue 33: two tuners share one store (SQLite, claims under leases); one with a budget of 4
    decides while the other, with 40, is still searching, and the larger decides again on its
    larger basis. Before, every tuner waited for every other's search."""
    big = Workers(faster_with(WIDTH, 512, 1.5), count=2, seconds=0.15)  # a claim in flight at every moment
    small = Workers(faster_with(WIDTH, 512, 1.5), count=1, seconds=0.15)
    settings = {**FAST, "stages": ("codegen",), "strategy": "random"}
    larger: dict[str, object] = {}
    thread = threading.Thread(target=lambda: larger.update(result=xtat.tune(
        tiny_mlp(), db=db, runner=fake_runner_factory(big), **settings, budget=40, seed=1)))
    thread.start()
    time.sleep(1.0)  # the larger search is under way
    smaller = xtat.tune(tiny_mlp(), db=db, runner=fake_runner_factory(small), **settings, budget=4, seed=2)
    with Store.open(db, read_only=True) as store:
        (workload,) = store.workloads()
        measured_then = len(store.trials(workload.id))
        decided_then = len(store.results(workload.id))
    thread.join(timeout=120)
    assert not thread.is_alive() and "result" in larger
    assert decided_then >= 1 and measured_then < 40, (decided_then, measured_then)  # it did not wait
    with Store.open(db, read_only=True) as store:
        results = store.results(workload.id)
    assert len(results) >= 2 and results[-1].detail.basis is not None  # the larger decided again
    assert len(results[-1].detail.basis) > len(results[0].detail.basis)
    assert smaller.outcome in tuple(AdoptionOutcome)


# -- paired timing (runner.timing.paired), on callables that return the test's "samples" ------------

def drifting(seconds: float, clock: list[int], drift: float = 0.5):
    """One sample of a build that takes `seconds` on a machine whose speed drifts by `drift` per
    100 samples (shared `clock`): what a single unpaired sample of a search misreads."""
    def sample() -> float:
        clock[0] += 1
        return seconds * (1.0 + drift * clock[0] / 100)
    return sample


def test_paired_timing_cancels_drift_that_separate_timings_read_as_a_speedup():
    from xtat.runner.timing import Race, TimingPolicy, paired

    clock = [0]
    reference, same = drifting(1e-3, clock, drift=1.0), drifting(1e-3, clock, drift=1.0)
    alone = [reference() for _ in range(5)]  # the default timed first; other candidates, then this one
    clock[0] += 10
    later = [same() for _ in range(5)]
    assert sum(alone) / sum(later) < 0.9  # apart, an identical build reads as >10% slower
    pairs = paired(same, reference, TimingPolicy(samples=5, contender_pairs=15), Race(1.0, 0.05))
    speedup, low, high = pairs.speedup
    assert low <= 1.0 <= high and abs(speedup - 1.0) < 0.015  # paired, it is a tie, as it is
    # the order alternates: the candidate goes first in even pairs, the reference in odd ones
    assert pairs.samples[0] < pairs.reference[0] and pairs.samples[1] > pairs.reference[1]


def test_paired_timing_times_contenders_longer_and_stops_a_lost_race_early():
    from xtat.runner.timing import Race, TimingPolicy, paired

    policy = TimingPolicy(samples=5, contender_pairs=15)
    clock = [0]
    default = drifting(1e-3, clock, drift=0.0)
    contender = paired(drifting(0.8e-3, clock, 0.0), default, policy, Race(incumbent=1.1))
    assert len(contender.samples) == 15 and not contender.raced  # may beat the incumbent: the long block
    assert 1.24 < contender.speedup[0] < 1.26
    behind = paired(drifting(0.95e-3, clock, 0.0), default, policy, Race(incumbent=1.08, margin=0.05))
    assert len(behind.samples) == 5 and not behind.raced  # cannot reach 1.08: the short block only
    slow = paired(drifting(2e-3, clock, 0.0), default, policy, Race(incumbent=1.0, margin=0.05))
    assert slow.raced and len(slow.samples) == len(slow.reference) == 3
    assert len(paired(drifting(2e-3, clock, 0.0), default, policy, None).samples) == 5  # no race: never cut


def test_a_candidate_undecided_against_its_bar_is_timed_on_until_settle_s_and_a_decided_one_is_not():
    import itertools

    from xtat.runner.timing import Race, TimingPolicy, paired

    ticks = itertools.count()

    def clock() -> float:  # a test double of the wall clock: 10 ms a look
        return next(ticks) * 0.01

    policy = TimingPolicy(samples=15, contender_pairs=15, settle_s=1.0)
    bar = Race(incumbent=1.02, margin=float("inf"))

    def speedups(*cycle: float) -> Callable[[], float]:  # the candidate's samples, the reference taking 1 ms
        values = itertools.cycle(cycle)
        return lambda: 1e-3 / next(values)

    reference = lambda: 1e-3  # noqa: E731
    # pairs reading 0.92x, 1.02x, 1.12x in turn: the interval holds the bar however long it is timed,
    # so it is timed on until settle_s is spent (the clock's first look is the start)
    undecided = paired(speedups(0.92, 1.02, 1.12), reference, policy, bar, clock=clock)
    assert len(undecided.samples) == 15 + 99 and not undecided.raced
    # clearly past the bar, or clearly under it: one block of 15 pairs decides
    assert len(paired(speedups(1.9, 2.0, 2.1), reference, policy, bar, clock=clock).samples) == 15
    assert len(paired(speedups(0.4, 0.5, 0.6), reference, policy, bar, clock=clock).samples) == 15
    # never past SETTLE_PAIRS_FACTOR blocks, however slowly the clock runs
    frozen = TimingPolicy(samples=15, contender_pairs=15, settle_s=1e9)
    assert len(paired(speedups(0.92, 1.02, 1.12), reference, frozen, bar, clock=clock).samples) == 150
    # without settle_s, the undecided candidate gets the block alone
    plain = TimingPolicy(samples=15, contender_pairs=15)
    assert len(paired(speedups(0.92, 1.02, 1.12), reference, plain, bar, clock=clock).samples) == 15


def test_candidates_race_against_what_the_incumbent_is_surely_worth():
    from xtat.store.records import Trial
    from xtat.tuning.measure import race_incumbent

    codegen, one_cpu = {"codegen": {WIDTH: 512}}, {"runtime": {"cpus": 1}}

    def trial(speedup: float, low: float, raced: bool = False, config: dict = codegen) -> Trial:
        return Trial(1, 1, 1, config, TrialStatus.OK, None, 0.1, "x", 1e-3, 1e-3, 1e-3, [1e-3],
                     None, None, None, None, None, 0.0, raced=raced, speedup=speedup, speedup_low=low)

    # The best median of many noisy figures overstates its trial: the race is run against the best
    # lower bound, and a raced trial's partial figure never sets it.
    assert race_incumbent([trial(2.0, 1.2), trial(1.5, 1.4), trial(3.0, 2.5, raced=True)], codegen) == 1.4
    assert race_incumbent([], codegen) == 1.0
    # Each kind, with a process setup or without, races its own best: a setup's figure rests on a
    # factor measured across processes, and a flat figure may rank it above what the user's step gets.
    setup_ahead = [trial(1.9, 1.8, config=one_cpu), trial(1.1, 1.05)]
    assert race_incumbent(setup_ahead, {"passes": {"cse": True}}) == 1.05
    assert race_incumbent(setup_ahead, {**one_cpu, "passes": {"cse": True}}) == 1.8
    assert race_incumbent([trial(1.5, 1.4)], one_cpu) == 1.0


def test_a_runtime_setup_is_timed_beside_the_default_in_its_own_worker_scaled_by_its_factor(tmp_path, monkeypatch):
    """Real workers: a candidate pinned to one CPU is timed against the default rebuilt in its own
    worker (pairing cancels that process's placement), and the default's samples are scaled by the
    setup's factor, measured once over `setup_pairs` pairs of processes: the run's two and fresh
    pairs, started for it and closed. Side by side, its rounds are spread over as many placements."""
    from xtat.capture.workload import capture
    from xtat.core.candidate import ProcessSetup
    from xtat.runner.process import ProcessRunner
    from xtat.runner.protocol import Compiled, Timed
    from xtat.runner.timing import TimingPolicy, speedup_ci
    from xtat.runner.verify import Tolerance

    captured = capture(tiny_mlp())
    runner = ProcessRunner(tmp_path, captured.exported, captured.inputs, captured.verify_inputs,
                           lambda program, layout: b"", 60.0, 10.0, 20.0)
    timing = TimingPolicy(min_sample_s=0.003, samples=7, contender_pairs=7, setup_pairs=2)
    pinned = Candidate(process=ProcessSetup(cpus=1))
    try:
        runner.start()
        assert isinstance(runner.build("a", pinned), Compiled)
        first = runner.measure("a", pinned, Tolerance(), timing)
        assert isinstance(first, Timed), first
        assert len(list(tmp_path.glob("setup-pair-*.log"))) == 2  # a fresh pair beside the run's own
        assert len(runner.pids()) == 2  # the fresh pairs are closed: the default's worker and the pinned one
        factor = runner.setup_factor(pinned.process, timing)  # measured once: no process is started for it
        assert len(list(tmp_path.glob("setup-pair-*.log"))) == 2 and 0.2 < factor < 5
        monkeypatch.setattr(runner, "setup_factor", lambda setup, timing: 1000 * factor)
        runner.pool.discard(ProcessSetup())  # the default's worker: the pinned candidate needs none
        second = runner.measure("a", pinned, Tolerance(), timing)
        assert isinstance(second, Timed), second
        assert len(runner.pids()) == 1  # its reference was in its own worker
        ratio = speedup_ci(list(second.reference), list(second.samples))[0] / \
            speedup_ci(list(first.reference), list(first.samples))[0]
        # The factor scales the figure. Two measurements of a tiny program under the test run's load
        # differ by up to 2x (seen in CI), so the scale is a thousand-fold and the bounds ten-fold.
        assert 100 < ratio < 10000, ratio
        # Side by side, the rounds are split over `setup_pairs` placements in fresh workers.
        before = len(list(tmp_path.glob("worker-*.log")))
        pairs = runner.interleave([("default", Candidate()), ("a", pinned)], 6, timing)
        assert len(list(tmp_path.glob("worker-*.log"))) - before == 2 * 2
        assert pairs is not None and len(pairs["a"]) == 6 and "default" not in pairs
    finally:
        runner.close()


def test_a_setup_factor_whose_pairs_disagree_takes_more_pairs_up_to_twice_as_many():
    from xtat.runner.timing import TimingPolicy, setup_decided

    policy = TimingPolicy(setup_pairs=2, setup_error=0.025)
    assert not setup_decided([1.3], policy)  # fewer than `setup_pairs`
    assert setup_decided([1.30, 1.32], policy)  # pairs that agree: the standard error is under 2.5%
    assert not setup_decided([1.16, 1.72], policy)  # BlackJAX's one-CPU factors of two runs
    assert not setup_decided([1.16, 1.72, 1.40], policy)
    assert setup_decided([1.16, 1.72, 1.40, 1.9], policy)  # the cap: twice `setup_pairs`
    fixed = TimingPolicy(setup_pairs=2)  # setup_error 0: exactly `setup_pairs`
    assert setup_decided([1.16, 1.72], fixed) and not setup_decided([1.16], fixed)
    assert setup_decided([2.0], TimingPolicy(setup_pairs=1, setup_error=0.025))  # one pair has no spread
    # A setup that slowed the default in every pair, beyond the margin, needs no precision.
    assert setup_decided([0.57, 0.61], policy) and not setup_decided([0.57], policy)
    assert not setup_decided([0.70, 0.97], policy)  # within the margin of 1 in one pair: more pairs


def test_pairs_of_processes_that_disagree_are_added_to_the_factor_and_to_the_placements(tmp_path, monkeypatch):
    """Real workers; each pair's ratio scripted: pairs that disagree take the factor to twice
    `setup_pairs` pairs of processes (each started and closed), and side by side the setup's rounds
    are spread over as many placements (asked of a test double: each is a fresh pair of workers)."""
    from xtat.capture.workload import capture
    from xtat.core.candidate import ProcessSetup
    from xtat.runner.process import ProcessRunner
    from xtat.runner.timing import TimingPolicy

    captured = capture(tiny_mlp())
    runner = ProcessRunner(tmp_path, captured.exported, captured.inputs, captured.verify_inputs,
                           lambda program, layout: b"", 60.0, 10.0, 20.0)
    scripted = iter([1.0, 1.6, 1.0, 1.6, 1.0])
    monkeypatch.setattr(runner, "_process_ratio", lambda *sides: next(scripted))
    timing = TimingPolicy(min_sample_s=0.003, samples=5, contender_pairs=5, setup_pairs=2, setup_error=0.025)
    pinned = Candidate(process=ProcessSetup(cpus=1))
    try:
        runner.start()
        assert runner.setup_ratios(pinned.process, timing) == (1.0, 1.6, 1.0, 1.6)
        assert len(list(tmp_path.glob("setup-pair-*.log"))) == 3 * 2  # three fresh pairs beside the run's own
        assert len(runner.pids()) == 2  # and closed
        placed: list[list[str]] = []  # the placements side by side asks for (test double: no workers started)
        monkeypatch.setattr(runner, "place", lambda builds, timing, deploy=None: placed.append([id for id, _ in builds])
                            or OneSampleEach(builds))
        pairs = runner.interleave([("default", Candidate()), ("a", pinned)], 6, timing)
        assert placed == [["default", "a"]] * 4
        assert pairs is not None and len(pairs["a"]) == 4 * 2  # 6 rounds over 4 placements: 2 each
        assert set(pairs["a"]) == {(1.0, 1.0)}  # each placement's cold rounds dropped
    finally:
        runner.close()


class OneSampleEach:
    """Test double of a placement (`runner.process.ProcessPlacement`): every build placed, one
    pair of samples each per round, of 1 s, but of 9 s in its first two rounds (a placement's first rounds
    after calibration are cold, so side by side drops them)."""

    def __init__(self, builds) -> None:
        self.placed = [(id, None) for id, _ in builds]
        self.failed: dict[str, str] = {}
        self.rounds = 0

    def sample_pairs(self, shuffle) -> dict[str, tuple[float, float]]:
        self.rounds += 1
        seconds = 9.0 if self.rounds <= 2 else 1.0
        return {id: (seconds, seconds) for id, _ in self.placed if id != "default"}


class LoggingWorker:
    """Test double of a worker process: each Sample request is logged (by worker) in a shared log and
    answers its position there as its "seconds"."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def request(self, request, deadline_s: float):
        from xtat.runner.protocol import Sampled

        self.log.append(self.name)
        return Sampled(float(len(self.log)))


def test_side_by_side_samples_each_build_next_to_a_default_sample_of_its_own():
    """Each finalist's ratio spans one pair: its sample and the default's are adjacent (each after
    its worker's dropped sample where the other worker ran last), both orders occur, and every
    finalist is sampled once a round."""
    import random

    from xtat.runner.process import ProcessPlacement

    log: list[str] = []
    finalists, default = LoggingWorker("finalists", log), LoggingWorker("default", log)
    placed = [("a", finalists), ("b", finalists), ("c", finalists), ("default", default)]
    placement = ProcessPlacement(placed, {id: 1 for id, _ in placed}, {}, 10.0)  # type: ignore[arg-type]
    shuffle = random.Random(0)
    orders = set()
    for _ in range(20):
        pairs = placement.sample_pairs(shuffle)
        assert set(pairs) == {"a", "b", "c"}
        for build, (default_at, own_at) in pairs.items():
            # Every timed sample follows a request to its own worker: never the first after idling.
            for position, worker in ((default_at, "default"), (own_at, "finalists")):
                assert position >= 2 and log[int(position) - 2] == worker, (build, log[-8:])
            # Adjacent: at most the build's worker's dropped sample between them.
            assert 1 <= abs(own_at - default_at) <= 2, (build, default_at, own_at)
            orders.add(own_at > default_at)
    assert orders == {True, False}
