"""The process-pool runner: a folder of programs and inputs, worker processes per process setup.

`ProcessRunner` implements `runner.base.Runner`. It writes each candidate's exported program
once, picks the worker for the candidate's process setup, prepares the reference outputs the
first time, decides every deadline, and drives interleaved timing across workers from the
parent (an idle worker waits on its pipe and costs nothing).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import random
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

import numpy as np

from xtat.capture.source import Source
from xtat.core.candidate import Candidate, ProcessSetup
from xtat.core.errors import UserError
from xtat.core.status import TrialStatus
from xtat.core.test_hooks import hook
from xtat.runner import protocol as p
from xtat.runner.base import DEFAULT_ID, Deployment, Pairs, WorkerFailure
from xtat.runner.host_lock import holding
from xtat.runner.pool import Pool, WorkerProcess
from xtat.runner.timing import WARMUP_ROUNDS, Race, TimingPolicy, median_ci, paired, setup_decided
from xtat.runner.verify import Budget, Tolerance
from xtat.runner.worker import DIMS_FILE

DEFAULT_PROGRAM = "program.bin"
REFERENCE_ID = "reference"  # the default, kept built in the default's worker for paired timing
CALLED_ID = "called-default"  # the default deployed as called, for a setup's factor (`deployed_ratios`)
CALLED_BLOCKS = 3  # a pair of processes deployed as called is timed this many times a flat pair's rounds
# Exports the workload's program with a candidate's program-stage rewrites, traced in a layout's
# placement ("" for none: `stages.sharding.layouts.in_placement`).
ExportRewritten = Callable[[dict, str], bytes]
OWNER_FILE = "owner.pid"  # in a run folder: the process that owns it (`tuning.session.remove_abandoned_folders`)


def program_request(candidate: Candidate, layout_in_program: bool) -> tuple[dict, str]:
    """What a candidate's program is exported from: its rewrites, and its layout when the layout is traced
    into the program (marked intermediates are constrained at trace time)."""
    return dict(candidate.program), candidate.layout if layout_in_program else ""


def request_digest(program: dict, layout: str) -> str | None:
    """The identity of the program file of a `program_request`; None for the captured program itself."""
    if not program and not layout:
        return None
    return hashlib.sha256(json.dumps([program, layout], sort_keys=True).encode()).hexdigest()


def program_digest(candidate: Candidate, layout_in_program: bool) -> str | None:
    """The identity of a candidate's program file; None for the captured program itself."""
    return request_digest(*program_request(candidate, layout_in_program))


R = TypeVar("R")


def _expect(reply: p.Reply, kind: type[R]) -> R | p.Failed:
    """A worker's reply as the request's own kind (or a failure); anything else breaks the protocol."""
    if isinstance(reply, (kind, p.Failed)):
        return reply
    raise p.ProtocolError(f"expected {kind.__name__} or Failed, the worker replied {type(reply).__name__}")


class ProcessRunner:
    def __init__(self, folder: Path, exported: bytes, inputs: list[np.ndarray],
                 verify_inputs: list[np.ndarray] | None, export_rewritten: ExportRewritten,
                 startup_deadline_s: float, deadline_factor: float, min_deadline_s: float,
                 measure_lock: Sequence[Path] | None = None, device: str | None = None,
                 dims: list[tuple[str, ...] | None] | None = None, layout_in_program: bool = False,
                 compile_slots: int = 1, source: Source | None = None):
        self.folder = folder
        self.source = source  # where workers import the user's function from, to call it as called
        self.compile_slots = compile_slots  # see `slots`
        self._siblings: list[ProcessRunner] = []
        self._loading = threading.Lock()  # shared with the siblings: one worker loads the run folder at a time
        self.node = socket.gethostname()
        self.measure_lock = measure_lock  # held while timing (`runner.host_lock`)
        self.pool = Pool(folder, device)  # on GPU every worker sees only `device`
        self._export_rewritten = export_rewritten
        self.layout_in_program = layout_in_program  # the workload marks intermediates: one program per layout
        self.startup_deadline_s = startup_deadline_s
        self.deadline_factor = deadline_factor
        self.min_deadline_s = min_deadline_s
        (folder / DEFAULT_PROGRAM).write_bytes(exported)
        np.savez(folder / "inputs_main.npz", *inputs)
        if verify_inputs is not None:
            np.savez(folder / "inputs_verify.npz", *verify_inputs)
        self.has_verify_inputs = verify_inputs is not None
        if dims and any(dims):  # the inputs' dimension names, for layouts (`stages.sharding`)
            (folder / DIMS_FILE).write_text(json.dumps(dims))
        self.compile_deadline_s = startup_deadline_s
        self.measure_deadline_s = startup_deadline_s
        self.budget = Budget()  # verification budget, calibrated with the reference
        self._references: dict[ProcessSetup, tuple[WorkerProcess, int]] = {}  # see `_reference`
        self._factors: dict[ProcessSetup, tuple[float, ...]] = {}  # per pair of processes: `setup_ratios`
        self._setups_deploy: Deployment | None = None  # see `measure_setups_as`

    def slots(self) -> list[ProcessRunner]:
        """This runner and `compile_slots - 1` siblings: each with workers of its own, sharing the run
        folder (programs, inputs, the reference outputs `start` made). Their compiles run side by side
        (the measuring lock held shared) and nothing is timed meanwhile (held exclusively), so a
        search compiles its next candidates on the cores the timing leaves idle."""
        while len(self._siblings) < self.compile_slots - 1:
            sibling = copy.copy(self)
            logs = self.folder / f"slot-{len(self._siblings) + 1}"
            logs.mkdir(exist_ok=True)
            sibling.pool = Pool(logs, self.pool.device)
            sibling._siblings, sibling._references, sibling._factors = [], {}, {}
            self._siblings.append(sibling)
        return [self, *self._siblings]

    def losses(self) -> list[str]:
        return []  # a worker process that dies is a failure of its candidate, not a lost machine

    # -- deadlines --------------------------------------------------------------

    def set_deadlines(self, compile_s: float, measure_s: float) -> None:
        self.compile_deadline_s = max(self.min_deadline_s, self.deadline_factor * compile_s)
        self.measure_deadline_s = max(self.min_deadline_s, self.deadline_factor * measure_s)

    # -- programs and workers ---------------------------------------------------

    def program_file(self, candidate: Candidate) -> str:
        """The exported program of a candidate, written once per distinct set of rewrites (and layout,
        when the workload marks intermediates)."""
        request = program_request(candidate, self.layout_in_program)
        key = request_digest(*request)
        if key is None:
            return DEFAULT_PROGRAM
        return self._written_once(f"program-{key[:16]}.bin", lambda: self._export_rewritten(*request))

    def _written_once(self, name: str, data: Callable[[], bytes]) -> str:
        """A program file of the run folder, written the first time it is asked for; its name."""
        path = self.folder / name
        if not path.exists():  # written whole, then renamed: another slot may read it at any moment
            partial = path.with_name(f"{name}.{threading.get_ident()}.partial")
            partial.write_bytes(data())
            os.replace(partial, path)
        return name

    def called_program_file(self, candidate: Candidate) -> str:
        """The `Source` program file of a candidate deployed as called (`Deployment.as_called`): the
        workload's source with the candidate's program-stage rewrites, written once per set of them."""
        if self.source is None:
            raise UserError("a build deployed as called needs the workload's source (a TARGET or Workload.source)")
        data = self.source.with_decisions(dict(candidate.program)).to_bytes()
        return self._written_once(f"called-{hashlib.sha256(data).hexdigest()[:16]}.json", lambda: data)

    def can_call_as_user(self) -> bool:
        return self.source is not None

    def start(self) -> None:
        self._worker()

    def _worker(self, setup: ProcessSetup = ProcessSetup(), fresh: bool = False) -> WorkerProcess:
        return self._worker_and_start(setup, fresh)[0]

    def _worker_and_start(self, setup: ProcessSetup = ProcessSetup(),
                          fresh: bool = False) -> tuple[WorkerProcess, bool]:
        """A loaded worker for this setup, and whether it was just started (it holds no builds)."""
        worker, started = (self.pool.fresh(setup), True) if fresh else self.pool.get(setup)
        if started:
            self._load(worker)
        return worker, started

    def _load(self, worker: WorkerProcess) -> None:
        with self._loading:  # the first worker of any slot writes the reference files the others load
            loaded = worker.request(p.LoadRun(str(self.folder)), self.startup_deadline_s)
            if not isinstance(loaded, p.Loaded):
                raise UserError(f"worker could not load the program: {_why(loaded)}")
            if not loaded.has_reference:
                self._prepare_reference(worker)

    def pids(self) -> list[int]:
        return [pid for runner in (self, *self._siblings) for pid in runner.pool.pids()]

    def discard(self, candidate: Candidate) -> None:
        self.pool.discard(candidate.process)

    def _prepare_reference(self, worker: WorkerProcess) -> None:
        """The default build's outputs become the reference (saved for later workers);
        its compile time gives the first deadlines."""
        deadline = self.startup_deadline_s
        try:
            built = worker.request(p.Compile(DEFAULT_ID, DEFAULT_PROGRAM, {}, is_default=True), deadline)
            if not isinstance(built, p.Compiled):
                raise UserError(f"the workload fails under the default compile: {_why(built)}")
            self.set_deadlines(built.compile_s, deadline / self.deadline_factor)
            reference = worker.request(p.ReferenceOutputs(DEFAULT_ID), deadline)
            if not isinstance(reference, p.Referenced):
                raise UserError(f"the workload fails to run under the default compile: {_why(reference)}")
            self.budget = Budget.from_json(reference.budget)
            worker.request(p.Release((DEFAULT_ID,)), deadline)
        except WorkerFailure as failure:
            raise UserError(
                f"the workload's default build failed in its worker: {failure.status}: {failure.error}"
            ) from None

    def _compile(self, worker: WorkerProcess, id: str, candidate: Candidate,
                 is_default: bool = False) -> p.Compiled | p.Failed:
        request = p.Compile(id, self.program_file(candidate), dict(candidate.compile_options), is_default,
                            candidate.layout)
        with holding(self.measure_lock, shared=True), _timing(self.node, id, "compile-"):  # never during a timing
            reply = worker.request(request, self.compile_deadline_s)
        if isinstance(reply, p.Compiled) and candidate.process:
            # Same machine code in another process setup is another candidate.
            setup = json.dumps(candidate.process.to_json(), sort_keys=True).encode()
            reply = replace(reply, exe_hash=hashlib.sha256(reply.exe_hash.encode() + setup).hexdigest())
        return _expect(reply, p.Compiled)

    def _guarded(self, candidate: Candidate, operation: Callable[[], R]) -> R | p.Failed:
        """A worker failure becomes a `Failed` reply; after any out-of-memory the next build
        starts in a fresh process with all memory free."""
        try:
            reply = operation()
        except WorkerFailure as failure:
            self.discard(candidate)
            return p.Failed(failure.status, failure.error)
        if isinstance(reply, p.Failed) and reply.status is TrialStatus.OOM:
            self.discard(candidate)
        return reply

    # -- one candidate at a time ------------------------------------------------------

    def build(self, id: str, candidate: Candidate, *, is_default: bool = False) -> p.Compiled | p.Failed:
        return self._guarded(candidate, lambda: self._compile(self._worker(candidate.process), id, candidate,
                                                              is_default))

    def measure(self, id: str, candidate: Candidate, tolerance: Tolerance, timing: TimingPolicy, *,
                is_default: bool = False, race: Race | None = None) -> p.Timed | p.Failed:
        """The default is timed alone; a candidate is verified, then timed in pairs with the reference
        (the default, built in the candidate's own worker). A candidate whose process setup sets the
        runtime is timed against the default built in its worker, and the reference's samples are scaled
        by the setup's factor (`setup_factor`: the default's time in a default process over its time
        in a process with the setup), so its figure is still a speedup over the default as deployed."""
        if is_default:
            def alone() -> p.Timed | p.Failed:
                worker = self._worker(candidate.process)  # started and loaded before the lock is taken
                with holding(self.measure_lock), _timing(self.node, id):
                    return _expect(worker.request(p.Measure(id, tolerance, timing, is_default),
                                                  self.measure_deadline_s), p.Timed)

            return self._guarded(candidate, alone)

        def timed() -> p.Timed | p.Failed:
            start = time.perf_counter()
            worker = self._worker(candidate.process)
            # Both may compile and start processes: before the lock is held. A setup that only loads
            # autotune results is timed against the default's worker: in its own, the default would
            # compile with those results too.
            beside = candidate.process if candidate.process == candidate.process.runtime else ProcessSetup()
            factor = self.setup_factor(beside, timing) if beside else 1.0
            reference, reference_inner = self._reference(timing, beside)
            deadline = self.measure_deadline_s
            with holding(self.measure_lock), _timing(self.node, id):  # verifying runs the build too
                prepared = _expect(worker.request(p.Prepare(id, tolerance, timing), deadline), p.Prepared)
                if isinstance(prepared, p.Failed):
                    return prepared

                def mine() -> float:
                    return _sampled(worker.request(p.Sample(id, prepared.inner), deadline), id)

                def theirs() -> float:
                    return factor * _sampled(reference.request(p.Sample(REFERENCE_ID, reference_inner), deadline),
                                             "the reference")

                pairs = paired(mine, theirs, timing, race)
            median, low, high = median_ci(list(pairs.samples), seed=timing.seed)
            return p.Timed(pairs.samples, prepared.inner, median, (low, high), time.perf_counter() - start,
                           pairs.raced, prepared.check, pairs.reference)

        return self._guarded(candidate, timed)

    def _reference(self, timing: TimingPolicy,
                   setup: ProcessSetup = ProcessSetup()) -> tuple[WorkerProcess, int]:
        """The worker of `setup` holding the default built as the reference of paired timing, and its
        inner repeats; built again (from the compile cache when it can) after that worker was replaced."""
        worker = self._worker(setup)
        held = self._references.get(setup)
        if held is None or held[0] is not worker:
            self._references[setup] = (worker, self._built_reference(worker, timing))
        return self._references[setup]

    def _built_reference(self, worker: WorkerProcess, timing: TimingPolicy) -> int:
        """Builds the default as the reference in `worker`; its calibrated inner repeats."""
        built = self._compile(worker, REFERENCE_ID, Candidate(), is_default=True)
        if isinstance(built, p.Failed):
            raise WorkerFailure(TrialStatus.RUN_ERROR, f"the reference (the default) did not rebuild: {_why(built)}")
        with holding(self.measure_lock):
            calibrated = worker.request(p.Calibrate(REFERENCE_ID, timing), self.measure_deadline_s)
        if not isinstance(calibrated, p.Calibrated):
            raise WorkerFailure(TrialStatus.RUN_ERROR, f"calibrating the reference failed: {_why(calibrated)}")
        return calibrated.inner

    def setup_factor(self, setup: ProcessSetup, timing: TimingPolicy) -> float:
        """How much faster the default runs in a process entering `setup` than in a default process:
        the geometric mean over `timing.setup_pairs` or more pairs of processes (`setup_ratios`) of
        each pair's median ratio (the two processes' default builds timed in alternating pairs),
        measured once per run.

        The first pair is the run's own two workers; the others are started for this and closed.
        One pair is not enough: two processes holding the same executable differ by up to ~20%
        on a VM (heap and code placement, the host's placement of each), steadily for their
        whole lives, so a figure resting on one pair of processes is that pair's, and a candidate's
        search figure missed its side-by-side one by 12-20% on half of the campaign's finalists
        that held the CPU count (docs/search.md). Every candidate with the setup is then timed
        against the default in its own worker, where pairing cancels the process's placement."""
        return float(np.exp(np.mean(np.log(self.setup_ratios(setup, timing)))))

    def measure_setups_as(self, deploy: Deployment) -> None:
        """See `Runner.measure_setups_as`: each factor measured from now on is measured as
        `deployed_ratios` says."""
        for runner in (self, *self._siblings):
            runner._setups_deploy = deploy

    def setup_ratios(self, setup: ProcessSetup, timing: TimingPolicy) -> tuple[float, ...]:
        """Each pair's ratio behind `setup_factor`: the run's own two workers first, then pairs
        started for it until they decide the factor (`timing.setup_decided`); measured once per run.
        Where setups are measured as deployed otherwise (`measure_setups_as`): `deployed_ratios`."""
        if setup not in self._factors:
            if self._setups_deploy is not None:
                self._factors[setup] = self.deployed_ratios(setup, timing, self._setups_deploy)
                return self._factors[setup]
            default_side, setup_side = self._reference(timing), self._reference(timing, setup)
            ratios = [self._process_ratio(default_side, setup_side, timing)]
            while not setup_decided(ratios, timing):
                name = f"setup-pair-{len(self._factors)}-{len(ratios) - 1}"
                ratios.append(self.spare_pair_ratio(setup, timing, name))
            self._factors[setup] = tuple(ratios)
        return self._factors[setup]

    def deployed_ratios(self, setup: ProcessSetup, timing: TimingPolicy, deploy: Deployment) -> tuple[float, ...]:
        """A setup's ratios with the default deployed as `deploy` says (the user's step called on the
        user's argument tree) in both processes of each pair: the run's own two workers, then pairs
        started for it, `timing.setup_pairs` in all, each over `CALLED_BLOCKS` times the flat
        pair's rounds. The search's workers hold the flat program, and a flat figure need not be
        the step's.

        On Flax NNX (14% of the default's call is jax's host work on its argument tree, which a
        process of one CPU no longer overlaps with the computation) one CPU's factor read
        1.40-1.63x flat and 1.06-1.20x as called (`benchmarks/setup_factor.py`, docs/search.md);
        at 4bb6c67 its one-CPU configs read 1.6-1.7x in the search and 1.10-1.55x side by side,
        as called. Blocks of 15 pairs read 1.32-2.26x one after another in one pair of processes
        (`--blocks`): what moves is the machine over seconds, not the pair, so a pair is timed
        longer and no more pairs are added where they disagree (a pair deployed as called costs
        about 9 s, one flat about 7 s)."""
        own = [self._reference(timing), self._reference(timing, setup)]
        program = self.called_program_file(Candidate())

        def deployed(worker: WorkerProcess) -> None:
            request = p.Deploy(CALLED_ID, program, {}, deploy.tolerance, is_default=True, as_called=deploy.as_called)
            with holding(self.measure_lock, shared=True):  # it compiles: never while another slot times
                reply = worker.request(request, self.compile_deadline_s)
            if not isinstance(reply, p.Deployed):
                raise WorkerFailure(TrialStatus.RUN_ERROR, f"the default did not deploy for a setup's factor: "
                                                           f"{_why(reply)}")

        with ThreadPoolExecutor(len(own), thread_name_prefix="xtat-called") as threads:
            list(threads.map(deployed, [worker for worker, _ in own]))
        try:
            sides = []
            for worker, _ in own:
                with holding(self.measure_lock):
                    calibrated = worker.request(p.Calibrate(CALLED_ID, timing), self.measure_deadline_s)
                if not isinstance(calibrated, p.Calibrated):
                    raise WorkerFailure(TrialStatus.RUN_ERROR, f"calibrating the default as called failed: "
                                                               f"{_why(calibrated)}")
                sides.append((worker, calibrated.inner))
            ratios = [self._process_ratio(sides[0], sides[1], timing, CALLED_ID, CALLED_BLOCKS)]
        finally:
            for worker, _ in own:
                if worker.alive():
                    worker.request(p.Release((CALLED_ID,)), self.compile_deadline_s)
        while len(ratios) < timing.setup_pairs:
            ratios.append(self.deployed_pair_ratio(setup, timing, f"setup-pair-{len(self._factors)}-{len(ratios) - 1}",
                                                   deploy))
        return tuple(ratios)

    def deployed_pair_ratio(self, setup: ProcessSetup, timing: TimingPolicy, name: str, deploy: Deployment) -> float:
        """The default's time in a default process over its time in a process entering `setup`, both
        started for it (logged as NAME-default and NAME-setup), deployed as `deploy` says and closed
        after: the median ratio of `CALLED_BLOCKS` times the flat pair's rounds of
        `ProcessPlacement`, after its warm-up rounds."""
        started: list[WorkerProcess] = []

        def start(process: ProcessSetup) -> WorkerProcess:
            started.append(self.pool.spare(process, f"{name}-{'setup' if process else 'default'}"))
            return started[-1]

        try:
            placement = self._placement([(DEFAULT_ID, Candidate()), (CALLED_ID, Candidate(process=setup))], timing,
                                        deploy, start)
            if placement.failed:
                which, why = next(iter(placement.failed.items()))
                raise WorkerFailure(TrialStatus.RUN_ERROR, f"the default did not deploy in a pair of processes for "
                                                           f"the factor of {setup.describe()} ({which}): {why}")
            shuffle = random.Random(timing.seed)
            for _ in range(WARMUP_ROUNDS):
                placement.sample_pairs(shuffle)
            rounds = [placement.sample_pairs(shuffle)[CALLED_ID] for _ in range(CALLED_BLOCKS * _pair_rounds(timing))]
            return float(np.median([default_s / setup_s for default_s, setup_s in rounds]))
        finally:
            for worker in started:
                worker.close()

    def spare_pair_ratio(self, setup: ProcessSetup, timing: TimingPolicy, name: str) -> float:
        """`_process_ratio` of a pair of processes started for it (a default one and one entering
        `setup`, logged as NAME-default and NAME-setup) and closed after."""
        pair = [self.pool.spare(s, f"{name}-{side}") for s, side in ((ProcessSetup(), "default"), (setup, "setup"))]
        try:
            # The two processes load and build side by side: nothing is timed meanwhile, and
            # a quick run's search spent most of its 40 s starting pairs one process at a time.
            with ThreadPoolExecutor(len(pair), thread_name_prefix="xtat-setup-pair") as threads:
                sides = list(threads.map(lambda worker: self._loaded_reference(worker, timing), pair))
            return self._process_ratio(sides[0], sides[1], timing)
        finally:
            for worker in pair:
                worker.close()

    def _loaded_reference(self, worker: WorkerProcess, timing: TimingPolicy) -> tuple[WorkerProcess, int]:
        self._load(worker)
        return worker, self._built_reference(worker, timing)

    def _process_ratio(self, default_side: tuple[WorkerProcess, int], setup_side: tuple[WorkerProcess, int],
                       timing: TimingPolicy, id: str = REFERENCE_ID, blocks: int = 1) -> float:
        """The median ratio of the default's time in `default_side`'s process to its time in
        `setup_side`'s, over `blocks` times `_pair_rounds` alternating pairs (the default: the
        build `id` in both)."""
        def sampler(side: tuple[WorkerProcess, int]) -> Callable[[], float]:
            worker, inner = side

            def sample() -> float:  # after one dropped sample: the other process ran meanwhile (`sample_pairs`)
                for _ in range(2):
                    seconds = _sampled(worker.request(p.Sample(id, inner), self.measure_deadline_s),
                                       "the reference")
                return seconds
            return sample

        with holding(self.measure_lock), _timing(self.node, "setup-factor"):
            pairs = paired(sampler(setup_side), sampler(default_side),
                           replace(timing, samples=blocks * _pair_rounds(timing)))
        return pairs.speedup[0]

    def release(self, id: str, candidate: Candidate) -> None:
        worker = self.pool.live(candidate.process)
        if worker is not None:  # a worker that died or was discarded holds nothing
            self._guarded(candidate, lambda: worker.request(p.Release((id,)), self.compile_deadline_s))

    def verify(self, id: str, candidate: Candidate, tolerance: Tolerance, repeats: int = 1,
               input_set: p.InputSet = p.InputSet.VERIFY) -> p.Verified | p.Failed:
        def checks() -> p.Verified | p.Failed:
            # The build may be gone: a confirmation's fresh workers since hold only what they deployed.
            worker = self._worker(candidate.process)
            if id not in worker.builds:
                built = self._compile(worker, id, candidate)
                if isinstance(built, p.Failed):
                    return built
            reply: p.Verified | p.Failed = p.Failed(TrialStatus.RUN_ERROR, "no check was asked")
            # Several checks: a config that is wrong only some of the time must not slip through.
            for _ in range(repeats):
                reply = _expect(worker.request(p.Verify(id, input_set, tolerance), self.measure_deadline_s),
                                p.Verified)
                if isinstance(reply, p.Failed):
                    return reply
            return reply

        return self._guarded(candidate, checks)

    # -- discovery ----------------------------------------------------------------

    def passes_that_ran(self, candidate: Candidate) -> list[str]:
        """HLO passes that changed the candidate's program (XLA dumps after changing passes only)."""
        dump = self.folder / f"passes-{time.monotonic_ns()}"
        probe = candidate.with_options(xla_dump_to=str(dump), xla_dump_hlo_pass_re=".*")
        reply = self.build("passes-probe", probe)
        self.release("passes-probe", probe)
        if isinstance(reply, p.Failed):
            return []
        names = {m.group(1) for path in dump.glob("*.txt")
                 for m in [re.search(r"\.after_(.+?)\.before_", path.name)] if m}
        return sorted(names - {"pipeline-start"})

    def autotune_results(self, candidate: Candidate) -> str:
        """XLA's autotune results for the candidate, dumped by a compile in a fresh worker (its in-process
        autotune cache empty) that loads no results of its own; "" where XLA wrote none (not on GPU)."""
        dump = self.folder / f"autotune-{time.monotonic_ns()}.textproto"
        probe = replace(candidate.with_options(xla_gpu_dump_autotune_results_to=str(dump)),
                        process=replace(candidate.process, autotune_results=""))
        self._worker(probe.process, fresh=True)
        reply = self.build("autotune-probe", probe)
        self.pool.discard(probe.process)  # its autotune cache must not serve a later candidate
        if isinstance(reply, p.Failed):
            raise UserError(f"compiling the program to read XLA's autotune results failed: {_why(reply)}")
        return dump.read_text() if dump.exists() else ""

    # -- interleaved timing across workers -----------------------------------------

    def place(self, builds: list[tuple[str, Candidate]], timing: TimingPolicy,
              deploy: Deployment | None = None) -> ProcessPlacement:
        """See `Runner.place`. Each process setup's fresh worker loads and builds its builds in a
        thread of its own: nothing is timed meanwhile, and a worker importing the user's code
        (`Deployment.as_called`) takes seconds."""
        return self._placement(builds, timing, deploy, self.pool.fresh)

    def _placement(self, builds: list[tuple[str, Candidate]], timing: TimingPolicy, deploy: Deployment | None,
                   start: Callable[[ProcessSetup], WorkerProcess]) -> ProcessPlacement:
        """`place` in workers `start` starts, one for each process setup of `builds`."""
        if deploy is not None and deploy.as_called and any(candidate.layout for _, candidate in builds):
            raise UserError("a build with a layout cannot be deployed as called")
        by_setup: dict[ProcessSetup, list[tuple[str, Candidate]]] = {}
        for id, candidate in builds:
            by_setup.setdefault(candidate.process, []).append((id, candidate))
        workers = {setup: start(setup) for setup in by_setup}

        def built(setup: ProcessSetup) -> list[tuple[str, p.Reply]]:
            worker = workers[setup]
            self._load(worker)
            replies: list[tuple[str, p.Reply]] = []
            for id, candidate in by_setup[setup]:
                with _blaming(id):
                    if deploy is None:
                        replies.append((id, self._compile(worker, id, candidate, is_default=id == DEFAULT_ID)))
                        continue
                    program = (self.called_program_file(candidate) if deploy.as_called
                               else self.program_file(candidate))
                    replies.append((id, worker.request(p.Deploy(id, program, dict(candidate.compile_options),
                                                                deploy.tolerance, is_default=id == DEFAULT_ID,
                                                                layout=candidate.layout,
                                                                as_called=deploy.as_called),
                                                       self.compile_deadline_s)))
            return replies

        with ThreadPoolExecutor(len(workers), thread_name_prefix="xtat-place") as threads:
            replies = dict(reply for done in threads.map(built, list(workers)) for reply in done)
        placed: list[tuple[str, WorkerProcess]] = []
        failed: dict[str, str] = {}
        for id, candidate in builds:  # in the order given
            reply = replies[id]
            if isinstance(reply, p.Failed):
                failed[id] = f"{reply.status}: {reply.error}"
            else:
                placed.append((id, workers[candidate.process]))
        inner = {}
        for id, worker in placed:
            with holding(self.measure_lock), _blaming(id):
                calibrated = worker.request(p.Calibrate(id, timing), self.measure_deadline_s)
            if not isinstance(calibrated, p.Calibrated):
                raise WorkerFailure(TrialStatus.RUN_ERROR, f"calibrating {id} failed: {_why(calibrated)}")
            inner[id] = calibrated.inner
        return ProcessPlacement(placed, inner, failed, self.measure_deadline_s, self.measure_lock)

    def interleave(self, builds: list[tuple[str, Candidate]], rounds: int, timing: TimingPolicy,
                   deploy: Deployment | None = None) -> Pairs | None:
        """`rounds` rounds of the builds, each placed in fresh workers. Where a build holds a process
        setup of its own, the rounds are split over as many placements, one after another, as that
        setup's factor took pairs of processes (`setup_ratios`; `timing.setup_pairs` when it has
        none yet), for the same reason: a figure across processes is one pair's otherwise; a build
        that failed in any placement has no samples. Each placement's first `WARMUP_ROUNDS` rounds
        are dropped, as confirmation's are."""
        setups = [candidate.process for _, candidate in builds if candidate.process.runtime]
        placements = max([timing.setup_pairs, *(len(self._factors.get(s, ())) for s in setups)]) if setups else 1
        each = -(-rounds // placements)
        pairs: Pairs = {id: [] for id, _ in builds if id != DEFAULT_ID}
        shuffle = random.Random(timing.seed)
        for _ in range(placements):
            placement = self.place(builds, timing, deploy)
            if DEFAULT_ID in placement.failed:
                return None
            for id in placement.failed:
                pairs.pop(id, None)
            for _ in range(WARMUP_ROUNDS):
                placement.sample_pairs(shuffle)
            for _ in range(each):
                for id, pair in placement.sample_pairs(shuffle).items():
                    if id in pairs:
                        pairs[id].append(pair)
        return pairs

    def close(self) -> None:
        for runner in (self, *self._siblings):
            runner.pool.close()


@dataclass
class ProcessPlacement:
    placed: list[tuple[str, WorkerProcess]]
    inner: dict[str, int]
    failed: dict[str, str]
    deadline_s: float
    measure_lock: Sequence[Path] | None = None
    _last: WorkerProcess | None = field(default=None, init=False)  # the worker sampled last

    def sample_pairs(self, shuffle: random.Random) -> dict[str, tuple[float, float]]:
        """See `Placement.sample_pairs`. Every ratio spans the short stretch of one pair, as the
        search's and confirmation's do: with three finalists sampled once each a round, the default
        sat idle through three of them at a time and read 13-17% slower (HMC,
        benchmarks/placement_bias.py). A worker that sat idle while another was timed first gives
        one sample that is dropped: an idle process runs slow for its first samples (its threads
        asleep); where finalists shared one worker and the default had another, that made them
        read 9-17% faster side by side than in the search (GNN, Haiku and HMC runs, docs/search.md)."""
        # Measured: with a fixed order 92 of 100 runs were biased between two identical builds.
        workers = dict(self.placed)
        others = [id for id in workers if id != DEFAULT_ID]
        shuffle.shuffle(others)
        pairs = {}
        for id in others:
            first, second = (DEFAULT_ID, id) if shuffle.random() < 0.5 else (id, DEFAULT_ID)
            seconds = {first: self._sample(first, workers[first]), second: self._sample(second, workers[second])}
            pairs[id] = (seconds[DEFAULT_ID], seconds[id])
        return pairs

    def _sample(self, id: str, worker: WorkerProcess) -> float:
        with holding(self.measure_lock), _blaming(id):
            if worker is not self._last:
                _sampled(worker.request(p.Sample(id, self.inner[id]), self.deadline_s), id)
                self._last = worker
            reply = worker.request(p.Sample(id, self.inner[id]), self.deadline_s)
        return _sampled(reply, id)


def _pair_rounds(timing: TimingPolicy) -> int:
    """The rounds of a pair of processes behind a setup's factor (`ProcessRunner._process_ratio`)."""
    return max(timing.samples, timing.contender_pairs)


@contextmanager
def _blaming(id: str) -> Iterator[None]:
    """A worker that fails while building or running `id` is that build's failure (`WorkerFailure.build`):
    the worker holds other builds too, and they must not be blamed with it."""
    try:
        yield
    except WorkerFailure as failure:
        if failure.build is None:
            failure.build = id
        raise


def _sampled(reply: p.Reply, what: str) -> float:
    if not isinstance(reply, p.Sampled):
        raise WorkerFailure(TrialStatus.RUN_ERROR, f"timing {what} failed: {_why(reply)}")
    return reply.seconds


@contextmanager
def _timing(node: str, id: str, kind: str = "") -> Iterator[None]:
    """TEST-ONLY log (`_log_timing`) of a span: its start, and its end unless it raised."""
    _log_timing(f"{kind}start", node, id)
    yield
    _log_timing(f"{kind}end", node, id)


def _log_timing(event: str, node: str, id: str) -> None:
    """TEST-ONLY (XTAT_TEST_TIMING_LOG): when each timing starts and ends, where, in which process."""
    if hook("XTAT_TEST_TIMING_LOG"):
        with open(hook("XTAT_TEST_TIMING_LOG"), "a") as log:
            log.write(json.dumps({"event": event, "node": node, "pid": os.getpid(), "id": id, "at": time.time()})
                      + "\n")


def _why(reply: p.Reply) -> str:
    return f"{reply.status}: {reply.error}" if isinstance(reply, p.Failed) else f"unexpected {type(reply).__name__}"
