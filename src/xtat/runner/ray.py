"""Measurement on a Ray cluster: search candidates are built and timed by workers on its nodes.

`xtat tune ... --executor ray[:ADDRESS] --workers N` runs N workers, each a Ray actor that holds
one unit of the custom resource `xtat_device` for its life: a node offers one unit per device
(`ray start --resources '{"xtat_device": 1}'`), so at most one candidate is timed per device at
a time, while compiles elsewhere overlap. A worker runs a `ProcessRunner` on its node, so a
crash, hang or out-of-memory still costs one candidate; it receives the exported program and the
inputs once, through Ray's object store, and a rewritten program with the candidate that needs it.

A worker whose node dies is a recorded loss of the candidate it was measuring (`losses`), which
is then retried once on a surviving worker; nothing is lost. A node whose environment (jax,
jaxlib, device) is not the workload's measures nothing. The default's reference outputs and the
confirmation of a winner run on the tuner's own machine, a node of the workload's environment.
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from xtat.core.candidate import GPU_PLATFORMS, Candidate
from xtat.core.errors import UserError
from xtat.core.status import TrialStatus
from xtat.runner import protocol as p
from xtat.runner.base import Executor
from xtat.runner.process import ExportRewritten, program_digest, program_request, request_digest
from xtat.runner.timing import Race, TimingPolicy
from xtat.runner.verify import Budget, Tolerance

DEVICE_RESOURCE = "xtat_device"


def node_name() -> str:
    """A Ray node as trials record it: its host and the start of its node id."""
    import ray

    return f"{socket.gethostname()}/{ray.get_runtime_context().get_node_id()[:8]}"


class NodeWorker:
    """The body of a Ray actor: a `ProcessRunner` on one node of the cluster."""

    def __init__(self, exported: bytes, inputs: list, verify_inputs: list | None, platform: str,
                 deadlines: tuple[float, float, float], dims: list | None = None, layout_in_program: bool = False,
                 devices: int = 1):
        from xtat.runner.host_lock import host_locks, measured_device
        from xtat.runner.process import OWNER_FILE, ProcessRunner

        folder = Path(tempfile.mkdtemp(prefix="xtat-ray-"))
        (folder / OWNER_FILE).write_text(str(os.getpid()))  # removed by a later run once this process is gone
        self._programs: dict[str, bytes] = {}
        # Programs arrive with the candidates that run them (`build`), keyed as the runner names them.
        self._layout_in_program = layout_in_program
        device = measured_device(platform, devices)
        self.runner = ProcessRunner(folder, exported, inputs, verify_inputs, lambda program, layout:
                                    self._programs[request_digest(program, layout) or ""], *deadlines,
                                    host_locks(platform, device), device, dims, layout_in_program)
        self.runner.node = node_name()

    def describe(self) -> dict[str, Any]:
        """Where it runs and under which environment (compared with the workload's)."""
        from xtat.capture.workload import environment_identity

        return {"node": self.runner.node, "env": environment_identity()}

    def start(self) -> None:
        self.runner.start()

    def set_deadlines(self, compile_s: float, measure_s: float) -> None:
        self.runner.set_deadlines(compile_s, measure_s)

    def build(self, id: str, candidate: Candidate, program: bytes | None, is_default: bool) -> p.Compiled | p.Failed:
        if program is not None:
            self._programs[program_digest(candidate, self._layout_in_program) or ""] = program
        return self.runner.build(id, candidate, is_default=is_default)

    def measure(self, id: str, candidate: Candidate, tolerance: Tolerance, timing: TimingPolicy, is_default: bool,
                race: Race | None) -> p.Timed | p.Failed:
        return self.runner.measure(id, candidate, tolerance, timing, is_default=is_default, race=race)

    def release(self, id: str, candidate: Candidate) -> None:
        self.runner.release(id, candidate)


class WorkerLost(Exception):
    """A worker's actor is gone: its node died or the actor was killed."""


class RaySlot:
    """One worker, as the search loop's slot: builds and times one candidate at a time on its actor."""

    def __init__(self, pool: RayPool, actor: Any, node: str):
        self.pool, self.actor, self.node = pool, actor, node
        self._lost: list[str] = []
        self._built: dict[str, tuple[Candidate, bool]] = {}  # builds this slot made on its actor

    def _call(self, method: str, *args: object) -> Any:
        return self.pool.get(getattr(self.actor, method).remote(*args))

    def _retrying(self, operation: Callable[[], Any], rebuild: str | None = None) -> Any:
        """Run on this slot's worker; if its node is lost, record it and retry once on a surviving worker."""
        try:
            return operation()
        except WorkerLost as lost:
            self._lost.append(f"{self.node}: {lost}")
            replacement = self.pool.survivor(self.actor)
            if replacement is None:
                return p.Failed(TrialStatus.CRASH, f"every worker of the Ray cluster was lost ({lost})")
            self.actor, self.node = replacement
        try:
            if rebuild is not None:  # the build was made on the lost worker
                candidate, is_default = self._built[rebuild]
                built = self._call("build", rebuild, candidate, self.pool.program_of(candidate), is_default)
                if isinstance(built, p.Failed):
                    return built
            return operation()
        except WorkerLost as lost:
            self._lost.append(f"{self.node}: {lost}")
            return p.Failed(TrialStatus.CRASH, f"the retry's node was lost too ({lost})")

    def build(self, id: str, candidate: Candidate, *, is_default: bool = False) -> p.Compiled | p.Failed:
        self._built[id] = (candidate, is_default)
        return self._retrying(lambda: self._call("build", id, candidate, self.pool.program_of(candidate), is_default))

    def measure(self, id: str, candidate: Candidate, tolerance: Tolerance, timing: TimingPolicy, *,
                is_default: bool = False, race: Race | None = None) -> p.Timed | p.Failed:
        return self._retrying(lambda: self._call("measure", id, candidate, tolerance, timing, is_default, race),
                              rebuild=id)

    def release(self, id: str, candidate: Candidate) -> None:
        self._built.pop(id, None)
        try:
            self._call("release", id, candidate)
        except WorkerLost:
            pass  # a lost worker holds nothing

    def set_deadlines(self, compile_s: float, measure_s: float) -> None:
        try:
            self._call("set_deadlines", compile_s, measure_s)
        except WorkerLost:
            pass

    def losses(self) -> list[str]:
        lost, self._lost = self._lost, []
        return lost

    def slots(self) -> Sequence[RaySlot]:
        return [self]


class RayPool:
    """The workers of one run on a Ray cluster, and what they share."""

    def __init__(self, actors: list[tuple[Any, str]], export_rewritten: ExportRewritten, layout_in_program: bool):
        import ray

        self._ray = ray
        self._export_rewritten = export_rewritten
        self._layout_in_program = layout_in_program
        self._programs: dict[str, bytes] = {}
        self._live = list(actors)
        self._lock = threading.Lock()
        self.slots = [RaySlot(self, actor, node) for actor, node in actors]

    def get(self, ref: Any) -> Any:
        from ray.exceptions import ActorUnavailableError, RayActorError

        try:
            return self._ray.get(ref)
        except (RayActorError, ActorUnavailableError) as exc:
            raise WorkerLost(str(exc).splitlines()[0][:200]) from exc

    def program_of(self, candidate: Candidate) -> bytes | None:
        """A candidate's rewritten program, exported here once (a worker cannot rewrite Python)."""
        request = program_request(candidate, self._layout_in_program)
        key = request_digest(*request)
        if key is None:
            return None
        with self._lock:
            if key not in self._programs:
                self._programs[key] = self._export_rewritten(*request)
            return self._programs[key]

    def survivor(self, lost_actor: Any) -> tuple[Any, str] | None:
        """A live worker other than the lost one (shared from then on), or None when none is left."""
        with self._lock:
            self._live = [(a, n) for a, n in self._live if a is not lost_actor]
            for actor, node in list(self._live):
                try:
                    self.get(actor.describe.remote())
                    return actor, node
                except WorkerLost:
                    self._live.remove((actor, node))
            return None

    def close(self) -> None:
        for actor, _ in self._live:
            try:
                self._ray.kill(actor)
            except Exception:  # already gone with its node
                pass


def connect(executor: Executor, workers: int) -> bool:
    """Join the cluster the executor names; True if a local one was started here (and is ours to stop).

    `ray`: the cluster of $RAY_ADDRESS or one already running on this machine, else a new local one
    with `workers` device units (timings on one host are serialized by `runner.host_lock`).
    `ray:ADDRESS`: the cluster at ADDRESS (host:port, or ray://host:port for Ray Client)."""
    try:
        import ray
    except ImportError as exc:
        raise UserError("--executor ray needs Ray: pip install 'xtat[ray]'") from exc
    if ray.is_initialized():
        return False
    address = executor.address
    try:
        if address is not None:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
            return False
        try:
            ray.init(address="auto", logging_level=logging.ERROR, log_to_driver=False)
            return False
        except ConnectionError:
            ray.init(num_cpus=workers, resources={DEVICE_RESOURCE: workers}, include_dashboard=False,
                     logging_level=logging.ERROR, log_to_driver=False)
            return True
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise UserError(f"--executor {executor}: cannot join the Ray cluster ({str(exc).splitlines()[0]}); start it "
                        "with `ray start --head --resources '{\"xtat_device\": 1}'`") from exc


def start_workers(worker_class: type, workers: int, args: tuple, env: dict | None,
                  devices: int = 1) -> list[tuple[Any, str]]:
    """`workers` actors of `worker_class`, each holding one device unit (and on GPU `devices` GPUs); refused
    if the cluster has fewer units, and any whose node's environment is not `env` (None: not checked)."""
    import ray

    units = int(ray.cluster_resources().get(DEVICE_RESOURCE, 0))
    if units < workers:
        raise UserError(f"--workers {workers}: the Ray cluster offers {units} '{DEVICE_RESOURCE}' unit(s), one per "
                        f"device; start each node with --resources '{{\"{DEVICE_RESOURCE}\": 1}}' or lower --workers")
    # On GPU each actor also takes its node's GPUs, one or a layout's `devices`: Ray sets its
    # CUDA_VISIBLE_DEVICES, so two actors of a node never time on the same one (`runner.host_lock`).
    gpus = devices if env is not None and env.get("platform") in GPU_PLATFORMS else 0
    remote: Any = ray.remote(num_cpus=0, num_gpus=gpus, resources={DEVICE_RESOURCE: 1},
                             max_restarts=0)(worker_class)
    refs = [ray.put(arg) for arg in args]
    actors: list[Any] = [remote.remote(*refs) for _ in range(workers)]
    described = ray.get([actor.describe.remote() for actor in actors])
    wrong = [d for d in described if env is not None and d["env"] != env]
    if wrong:
        for actor in actors:
            ray.kill(actor)
        raise UserError(f"Ray node {wrong[0]['node']} runs {wrong[0]['env']}, not the workload's environment {env}: "
                        "install the same jax and jaxlib on every node, or tune on a cluster of this environment")
    ray.get([actor.start.remote() for actor in actors])
    return [(actor, d["node"]) for actor, d in zip(actors, described, strict=True)]


class RayRunner:
    """The `Runner` of a run on Ray: the search's candidates on the cluster's workers (`slots`);
    the reference, verification and confirmation on this machine (`local`)."""

    def __init__(self, local: Any, pool: RayPool):
        self.local, self.pool = local, pool
        self.node = local.node

    @property
    def budget(self) -> Budget:  # the verification budget, calibrated on this machine's reference
        return self.local.budget

    def slots(self) -> Sequence[RaySlot]:
        return self.pool.slots

    def losses(self) -> list[str]:
        return []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.local, name)  # start, verify, interleave, place, passes_that_ran, ...
