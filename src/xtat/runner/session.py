"""The measuring side of one tuning run: a folder of programs and inputs, workers per environment.

`Session` turns a `Candidate` (program rewrites, compile options, worker
environment) into worker requests: it writes the candidate's exported
program once, picks the worker for the candidate's environment, prepares the
reference outputs the first time, and drives interleaved timing across
workers from the parent (an idle worker waits on its pipe and costs nothing).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
from pathlib import Path
from typing import Callable

import numpy as np

from xtat.errors import UserError
from xtat.runner.pool import Pool, WorkerEnv, WorkerFailure, WorkerProcess
from xtat.runner.verify import Budget
from xtat.stages.base import Candidate

DEFAULT_ID = "default"
DEFAULT_PROGRAM = "program.bin"


class Session:
    def __init__(self, folder: Path, exported: bytes, inputs: list[np.ndarray],
                 verify_inputs: list[np.ndarray] | None, export_rewritten: Callable[[dict], bytes],
                 startup_deadline_s: float, deadline_factor: float, min_deadline_s: float):
        self.folder = folder
        self.pool = Pool(folder)
        self._export_rewritten = export_rewritten
        self.startup_deadline_s = startup_deadline_s
        self.deadline_factor = deadline_factor
        self.min_deadline_s = min_deadline_s
        (folder / DEFAULT_PROGRAM).write_bytes(exported)
        np.savez(folder / "inputs_main.npz", *inputs)
        if verify_inputs is not None:
            np.savez(folder / "inputs_verify.npz", *verify_inputs)
        self.has_verify_inputs = verify_inputs is not None
        self.compile_deadline_s = startup_deadline_s
        self.measure_deadline_s = startup_deadline_s
        self.budget = Budget()  # verification budget, calibrated with the reference

    # -- deadlines --------------------------------------------------------------

    def set_deadlines(self, compile_s: float, measure_s: float) -> None:
        self.compile_deadline_s = max(self.min_deadline_s, self.deadline_factor * compile_s)
        self.measure_deadline_s = max(self.min_deadline_s, self.deadline_factor * measure_s)

    # -- programs and workers ---------------------------------------------------

    def program_file(self, candidate: Candidate) -> str:
        """The exported program of a candidate, written once per distinct set of rewrites."""
        if not candidate.program:
            return DEFAULT_PROGRAM
        digest = hashlib.sha256(json.dumps(candidate.program, sort_keys=True).encode()).hexdigest()[:16]
        name = f"program-{digest}.bin"
        path = self.folder / name
        if not path.exists():
            path.write_bytes(self._export_rewritten(candidate.program))
        return name

    def worker(self, env: tuple[tuple[str, str], ...] = (), fresh: bool = False) -> WorkerProcess:
        return self.worker_and_start(env, fresh)[0]

    def worker_and_start(self, env: tuple[tuple[str, str], ...] = (),
                         fresh: bool = False) -> tuple[WorkerProcess, bool]:
        """A loaded worker for this environment, and whether it was just started (it holds no builds)."""
        key = WorkerEnv(env)
        worker, started = (self.pool.fresh(key), True) if fresh else self.pool.get(key)
        if started:
            reply = worker.request("load", self.startup_deadline_s, folder=str(self.folder))
            if not reply.get("ok"):
                raise UserError(f"worker could not load the program: {reply.get('error')}")
            if not reply.get("has_reference"):
                self._prepare_reference(worker)
        return worker, started

    def pids(self) -> list[int]:
        """The workers' process ids (for the load monitor, which counts their CPU time as xtat's)."""
        return self.pool.pids()

    def discard(self, env: tuple[tuple[str, str], ...] = ()) -> None:
        self.pool.discard(WorkerEnv(env))

    def _prepare_reference(self, worker: WorkerProcess) -> None:
        """The default build's outputs become the reference (saved for later workers);
        its compile time gives the first deadlines."""
        deadline = self.startup_deadline_s
        try:
            reply = worker.request("compile", deadline, id=DEFAULT_ID, program=DEFAULT_PROGRAM, options={},
                                   is_default=True)
            if not reply.get("ok"):
                raise UserError(f"the workload fails under the default compile: {reply.get('error')}")
            self.set_deadlines(reply["compile_s"], deadline / self.deadline_factor)
            reply = worker.request("reference_outputs", deadline, id=DEFAULT_ID)
            if not reply.get("ok"):
                raise UserError(f"the workload fails to run under the default compile: {reply.get('error')}")
            self.budget = Budget.from_json(reply.get("budget"))
            worker.request("release", deadline, ids=[DEFAULT_ID])
        except WorkerFailure as failure:
            raise UserError(
                f"the workload's default build failed in its worker: {failure.status}: {failure.error}"
            ) from None

    def compile(self, worker: WorkerProcess, id: str, candidate: Candidate, is_default: bool = False) -> dict:
        reply = worker.request("compile", self.compile_deadline_s, id=id, program=self.program_file(candidate),
                               options=candidate.compile_options, is_default=is_default)
        if reply.get("ok") and candidate.env:
            # Same machine code under another runtime environment is another candidate.
            env = json.dumps(candidate.env).encode()
            reply["exe_hash"] = hashlib.sha256(reply["exe_hash"].encode() + env).hexdigest()
        return reply

    # -- discovery ----------------------------------------------------------------

    def passes_that_ran(self, candidate: Candidate) -> list[str]:
        """HLO passes that changed the candidate's program (XLA dumps after changing passes only)."""
        dump = self.folder / f"passes-{time.monotonic_ns()}"
        options = {**candidate.compile_options, "xla_dump_to": str(dump), "xla_dump_hlo_pass_re": ".*"}
        worker = self.worker(candidate.env)
        reply = worker.request("compile", self.compile_deadline_s, id="passes-probe",
                               program=self.program_file(candidate), options=options)
        worker.request("release", self.compile_deadline_s, ids=["passes-probe"])
        if not reply.get("ok"):
            return []
        names = {m.group(1) for path in dump.glob("*.txt")
                 for m in [re.search(r"\.after_(.+?)\.before_", path.name)] if m}
        return sorted(names - {"pipeline-start"})

    # -- interleaved timing across workers -----------------------------------------

    def place(self, builds: list[tuple[str, Candidate]], timing: dict, deploy_tolerance: dict | None = None
              ) -> tuple[list[tuple[str, WorkerProcess]], dict[str, int], dict[str, str]]:
        """Build each candidate in a fresh worker for its environment (one per environment) and
        calibrate its inner repeats. With `deploy_tolerance` builds go through the deploy path
        (`jax.jit(..., compiler_options=...)`, outputs verified) instead of lower().compile().
        Returns the placed (id, worker) pairs, inner repeats by id, and why the others failed."""
        workers: dict[tuple, WorkerProcess] = {}
        placed: list[tuple[str, WorkerProcess]] = []
        failed: dict[str, str] = {}
        for id, candidate in builds:
            if candidate.env not in workers:
                workers[candidate.env] = self.worker(candidate.env, fresh=True)
            worker = workers[candidate.env]
            if deploy_tolerance is None:
                reply = self.compile(worker, id, candidate, is_default=id == DEFAULT_ID)
            else:
                reply = worker.request("deploy", self.compile_deadline_s, id=id, program=self.program_file(candidate),
                                       options=candidate.compile_options, tolerance=deploy_tolerance,
                                       is_default=id == DEFAULT_ID)
            if reply.get("ok"):
                placed.append((id, worker))
            else:
                failed[id] = f"{reply.get('status')}: {reply.get('error')}"
        inner = {id: worker.request("calibrate", self.measure_deadline_s, id=id, timing=timing)["inner"]
                 for id, worker in placed}
        return placed, inner, failed

    def sample_round(self, placed: list[tuple[str, WorkerProcess]], inner: dict[str, int],
                     shuffle: Callable[[list], None]) -> dict[str, float]:
        """One sample of each placed build, in a new order: whichever build goes first in a round
        can be systematically slower or faster (measured: 92 of 100 runs biased between two
        identical builds with a fixed order), and that must not decide adoption."""
        order = list(placed)
        shuffle(order)
        return {id: worker.request("sample", self.measure_deadline_s, id=id, inner=inner[id])["seconds"]
                for id, worker in order}

    def interleave(self, builds: list[tuple[str, Candidate]], rounds: int, timing: dict) -> dict[str, list[float]]:
        """Compile each build in a fresh worker for its environment, then time them
        round-robin (ABCABC...). Returns samples per build id; builds that fail to
        compile are left out."""
        placed, inner, _ = self.place(builds, timing)
        samples: dict[str, list[float]] = {id: [] for id, _ in placed}
        shuffle = random.Random(timing.get("seed", 0)).shuffle
        for _ in range(rounds):
            for id, seconds in self.sample_round(placed, inner, shuffle).items():
                samples[id].append(seconds)
        return samples

    def close(self) -> None:
        self.pool.close()
