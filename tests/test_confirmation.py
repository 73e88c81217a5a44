"""Confirmation (tuning/confirmation.py): the sequential design's error rates, the deploy path,
and the load rule."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

import xtat
from tiny import CHUNKED, tiny_chunked_mlp
from xtat.runner.load import LoadMonitor, MachineLoad, cpu_ticks
from xtat.runner.protocol import Failed
from xtat.tuning.confirmation import SequentialDesign, Verdict
from xtat.tuning.result import AdoptionOutcome


def simulate(true_speedup: float, spread: float, runs: int, design: SequentialDesign, seed: int) -> list[Verdict]:
    return design.simulate(true_speedup, spread, runs, seed)


# The per-round ratio spread of a convolution train step here: interval widths 0.08-0.23 at
# 21 rounds (issue 15) correspond to a per-build log-time sd of about 0.07-0.2.
NOISY = 0.15


def test_a_tie_is_adopted_at_most_alpha_of_the_time():
    design = SequentialDesign(threshold=1.02)
    verdicts = simulate(1.0, NOISY, 300, design, seed=1)
    assert verdicts.count(Verdict.FASTER) / len(verdicts) <= design.alpha
    # At the threshold itself, the worst case the bound covers:
    verdicts = simulate(1.02, NOISY, 300, design, seed=2)
    assert verdicts.count(Verdict.FASTER) / len(verdicts) <= design.alpha


def test_a_real_fifteen_percent_win_on_a_noisy_program_is_adopted():
    design = SequentialDesign(threshold=1.02)
    verdicts = simulate(1.15, NOISY, 300, design, seed=3)
    assert verdicts.count(Verdict.FASTER) / len(verdicts) >= 0.95
    # One look of 21 rounds, what adoption used to be, misses it far more often.
    single = simulate(1.15, NOISY, 300, SequentialDesign(threshold=1.02, max_looks=1, alpha=0.05), seed=3)
    assert single.count(Verdict.FASTER) < verdicts.count(Verdict.FASTER)


def test_a_clearly_slower_config_stops_early_as_not_faster():
    design = SequentialDesign(threshold=1.02)
    assert set(simulate(0.8, NOISY, 50, design, seed=4)) == {Verdict.NOT_FASTER}


def test_the_adopted_figure_is_the_confirmed_one(db, monkeypatch):
    # TEST-ONLY fault: every call of the default build sleeps 1 ms: every candidate is faster (each
    # of the default, chunks(2) and chunks(4) is a build of its own: tiny.py).
    monkeypatch.setenv("XTAT_FAULT", "default:run:slow")
    result = xtat.tune(tiny_chunked_mlp(), db=db, budget=3, **CHUNKED)
    assert result.adopted and "through jax.jit in fresh processes" in result.message
    confirmation = result.confirmation
    assert confirmation.verdict is Verdict.FASTER and confirmation.rounds >= CHUNKED["rounds"]
    assert (result.speedup, result.speedup_ci) == (confirmation.speedup, confirmation.speedup_ci)
    chosen = next(f for f in result.finalists if f.config == result.best_config)
    assert chosen.search_speedup is not None and chosen.speedup == confirmation.speedup
    assert confirmation.load.other_cores is not None


def test_a_config_that_sets_the_runtime_is_confirmed_over_fresh_pairs_of_processes(tmp_path, monkeypatch):
    from tiny import FAST, tiny_mlp
    from xtat.capture.workload import capture
    from xtat.core.candidate import Candidate, ProcessSetup
    from xtat.runner.process import ProcessRunner
    from xtat.tuning.confirmation import confirm
    from xtat.tuning.settings import TuneSettings

    monkeypatch.setenv("XTAT_FAULT", "default:run:slow")  # TEST-ONLY: the default sleeps 1 ms a call
    captured = capture(tiny_mlp())
    runner = ProcessRunner(tmp_path, captured.exported, captured.inputs, captured.verify_inputs,
                           lambda program, layout: b"", 60.0, 10.0, 20.0)
    settings = TuneSettings(**{**FAST, "setup_pairs": 3, "confirm_looks": 4})
    try:
        runner.start()
        before = len(list(tmp_path.glob("worker-*.log")))
        confirmation = confirm(runner, Candidate(process=ProcessSetup(cpus=1)), "pinned", settings)
        # Clearly faster from the first look, yet no verdict before the third pair of processes.
        assert confirmation.verdict is Verdict.FASTER and confirmation.looks == 3
        assert confirmation.looks_for_a_verdict == 3  # recorded, for the message of one cut short
        assert len(list(tmp_path.glob("worker-*.log"))) - before == 2 * 3  # each look in a fresh pair
    finally:
        runner.close()


# A neighbour's process: started by a launcher that exits at once, so that it is not under this
# process (every process started from the tuner's process counts as the tuner's own).
NEIGHBOUR = ("import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', 'while True: pass'], "
             "start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)")


@pytest.fixture
def busy_core():
    launcher = subprocess.run([sys.executable, "-c", NEIGHBOUR], capture_output=True, text=True, check=True)
    spinner = int(launcher.stdout)
    try:
        yield spinner
    finally:
        os.kill(spinner, signal.SIGKILL)


def test_the_load_monitor_sees_other_processes_and_not_its_own(busy_core):
    # Over the same second: one monitor counts the spinning process as another's, one as its own.
    others, own = LoadMonitor(lambda: []), LoadMonitor(lambda: [busy_core])
    time.sleep(1.0)
    seen, unseen = others.report(), own.report()
    assert seen.other_cores >= 0.3 and seen.other_cores - unseen.other_cores >= 0.3, (seen, unseen)
    assert seen.load_average is not None and seen.cores >= 1


def test_steal_time_is_told_but_not_another_process_load():
    """Steal is the hypervisor running other machines on these cores: on a shared VM it rises whenever
    xtat is busy, and counted as another process's it made idle machines' confirmations load-dependent."""
    # /proc/stat's `cpu` line recorded on a 2-core VM: user nice system idle iowait irq softirq steal guest guest_nice
    recorded = "cpu  4520296 33383 226430 2262243 8141 0 13404 260756 0 0"
    assert cpu_ticks(recorded) == (4520296 + 33383 + 226430 + 0 + 13404, 260756)
    assert cpu_ticks("cpu  10 0 5 100") == (15, 0)  # an old kernel's shorter line
    assert "steal" in MachineLoad(10.0, 0.0, 0.5, 2, stolen_cores=0.6).describe()


def test_processes_started_from_here_are_its_own_even_once_they_have_exited():
    """A confirmation's fresh processes and replaced workers are xtat's own CPU time: the tree under the
    tuner, reaped children included (issue 30: an idle machine's confirmation was called loaded)."""
    sleeper = subprocess.Popen(["sleep", "60"])  # a root with nothing under it: sees the burner as another's
    try:
        blind, seeing = LoadMonitor(lambda: [], root=sleeper.pid), LoadMonitor(lambda: [])
        # One CPU second, however busy the machine (a wall-clock second got a fraction of a core when the
        # test processes outnumbered the cores): started, busy, exited and reaped within the window.
        burn = "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass"
        subprocess.run([sys.executable, "-c", burn], check=True)
        unseen, seen = blind.report(), seeing.report()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert unseen.other_cores is not None and seen.other_cores is not None
    # CPU seconds, not cores: the burner's second is another's to one monitor and its own to the other.
    assert unseen.other_cores * unseen.wall_s - seen.other_cores * seen.wall_s >= 0.6, (unseen, seen)


def test_a_win_confirmed_under_load_is_not_adopted_unless_asked(db, monkeypatch, busy_core):
    monkeypatch.setenv("XTAT_FAULT", "default:run:slow")
    settings = {**CHUNKED, "adopt_under_load": False}
    result = xtat.tune(tiny_chunked_mlp(), db=db, budget=3, **settings)
    assert result.outcome is AdoptionOutcome.LOAD_DEPENDENT and "--adopt-under-load" in result.message
    assert result.confirmation.verdict is Verdict.FASTER and result.confirmation.load_dependent
    assert any("under load" in note for note in result.notes)


# A workload whose argument tree holds a pytree node jax flattens in Python: each flatten logs the
# process it ran in, so the test sees where the user's tree was taken apart.
AS_CALLED_TARGET = '''
import os
import jax
import jax.numpy as jnp
import numpy as np
import xtat


@jax.tree_util.register_pytree_node_class
class State:
    def __init__(self, w, key, scale):
        self.w, self.key, self.scale = w, key, scale

    def tree_flatten(self):
        with open({log!r}, "a") as log:
            log.write(f"{{os.getpid()}}\\n")
        return (self.w, self.key, self.scale), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


def step(state, x):
    noise = jax.random.normal(state.key, x.shape)
    key, _ = jax.random.split(state.key)
    return State(state.w * state.scale + jnp.tanh(x + noise).sum(), key, state.scale), x @ state.w


def make():
    rng = np.random.default_rng(0)
    state = State(rng.standard_normal((16, 16)).astype(np.float32), jax.random.key(0), 0.5)
    return xtat.Workload(step, (state, rng.standard_normal((8, 16)).astype(np.float32)))
'''


def test_a_build_deployed_as_called_takes_the_users_own_argument_tree_apart_on_every_call(tmp_path):
    from tiny import FAST
    from xtat.capture.targets import load_target
    from xtat.capture.workload import capture
    from xtat.core.candidate import Candidate
    from xtat.runner.base import DEFAULT_ID, Deployment
    from xtat.tuning.session import open_runner
    from xtat.tuning.settings import TuneSettings

    log = tmp_path / "flattened.log"
    path = tmp_path / "as_called.py"
    path.write_text(AS_CALLED_TARGET.format(log=str(log)))
    captured = capture(load_target(f"{path}:make"))  # a typed key and a Python scalar among the leaves
    settings = TuneSettings(**FAST)
    option = Candidate(compile_options={"xla_backend_optimization_level": 1})
    with open_runner(captured, settings) as runner:
        assert runner.can_call_as_user()
        runner.start()
        log.write_text("")
        flat = runner.place([(DEFAULT_ID, Candidate()), ("option", option)], settings.timing,
                            Deployment(settings.tolerance))
        flat.sample_pairs(random.Random(0))
        assert not flat.failed and not log.read_text()  # the flat program never sees the user's tree
        called = runner.place([(DEFAULT_ID, Candidate()), ("option", option)], settings.timing,
                              Deployment(settings.tolerance, as_called=True))
        assert not called.failed, called.failed  # deployed, and its outputs verified against the default's
        before = len(log.read_text().split())
        called.sample_pairs(random.Random(0))
        flattened = [int(pid) for pid in log.read_text().split()]
        assert len(flattened) > before and set(flattened) - {os.getpid()}  # in the workers, per call



def test_a_setups_factor_is_measured_as_called_where_the_finalists_are(tmp_path):
    # Flax NNX's one-CPU factor read 1.40-1.63x on the flat program and 1.06-1.20x as called:
    # where the finalists are measured as called, so is each pair of processes behind a setup's
    # factor: the run's own two workers, then pairs started for it (and closed), `setup_pairs` in
    # all, whether or not they agree.
    from dataclasses import replace

    from tiny import FAST
    from xtat.capture.targets import load_target
    from xtat.capture.workload import capture
    from xtat.core.candidate import Candidate, ProcessSetup
    from xtat.runner.base import Deployment
    from xtat.runner.protocol import Compiled, Timed
    from xtat.tuning.session import open_runner
    from xtat.tuning.settings import TuneSettings

    log = tmp_path / "flattened.log"
    path = tmp_path / "as_called.py"
    path.write_text(AS_CALLED_TARGET.format(log=str(log)))
    captured = capture(load_target(f"{path}:make"))
    settings = TuneSettings(**FAST)
    timing = replace(settings.timing, setup_pairs=2, setup_error=1e-9)  # flat, pairs would be added up to 4
    pinned = Candidate(process=ProcessSetup(cpus=1))
    with open_runner(captured, settings) as runner:
        runner.start()
        runner.measure_setups_as(Deployment(settings.tolerance, as_called=True))
        assert isinstance(runner.build("pinned", pinned), Compiled)
        log.write_text("")
        own = set(runner.pids())
        timed = runner.measure("pinned", pinned, settings.tolerance, timing)
        assert isinstance(timed, Timed), timed
        assert len(runner.setup_ratios(pinned.process, timing)) == 2  # measured once, in the measure
        flattened = {int(pid) for pid in log.read_text().split()} - {os.getpid()}
        assert own <= flattened, (own, flattened)  # the user's step, called in the run's own two workers
        assert flattened - own, flattened  # and in a pair started for it
        assert len(list(runner.folder.glob("setup-pair-*.log"))) == 2
        assert set(runner.pids()) == own  # that pair is closed


def test_a_finalist_is_verified_after_a_confirmation_replaced_the_worker_that_built_it():
    # A rival finalist is verified after the leader's confirmation, whose fresh workers hold only
    # the default and the leader: its build is made again there, not asked of a worker without it
    # (where it failed as a run error, and was demoted as a wrong result).
    from tiny import FAST, tiny_mlp
    from xtat.capture.workload import capture
    from xtat.core.candidate import Candidate
    from xtat.runner.base import DEFAULT_ID, Deployment
    from xtat.runner.protocol import Verified
    from xtat.tuning.session import open_runner
    from xtat.tuning.settings import TuneSettings

    settings = TuneSettings(**FAST)
    rival = Candidate(compile_options={"xla_backend_optimization_level": 1})
    leader = Candidate(compile_options={"xla_backend_optimization_level": 2})
    with open_runner(capture(tiny_mlp()), settings) as runner:
        runner.start()
        assert not isinstance(runner.build("rival", rival), Failed)
        placement = runner.place([(DEFAULT_ID, Candidate()), ("leader", leader)], settings.timing,
                                 Deployment(settings.tolerance))
        assert not placement.failed, placement.failed
        checked = runner.verify("rival", rival, settings.tolerance)
        assert isinstance(checked, Verified), checked
