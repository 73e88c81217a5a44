"""Measurement on a Ray cluster: search candidates are built and timed by workers on its nodes.

`xtat tune ... --executor ray[:ADDRESS] --workers N` runs N workers, each a Ray actor that holds
Ray's own resources for its life: one CPU, and on GPU the GPUs it times on (Ray sets their
CUDA_VISIBLE_DEVICES). A cluster needs nothing of its own for xtat: any `ray start` cluster
serves. Workers are spread over the nodes; on one host their timings take turns
(`runner.host_lock`), while compiles overlap. A worker runs a `ProcessRunner` on its node, so a
crash, hang or out-of-memory still costs one candidate; it receives the exported program and the
inputs once, through Ray's object store, and a rewritten program with the candidate that needs it.

A worker whose node dies is a recorded loss of the candidate it was measuring (`losses`); a
replacement worker is started where the cluster has room left (else a surviving worker takes its
place too) and the candidate is measured there; nothing is lost. A node whose environment (jax,
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

from xtat.capture.workload import DEVICES, environment_differences
from xtat.core.candidate import GPU_PLATFORMS, Candidate
from xtat.core.errors import UserError
from xtat.core.status import TrialStatus
from xtat.runner import protocol as p
from xtat.runner.base import Executor
from xtat.runner.process import ExportRewritten, program_digest, program_request, request_digest
from xtat.runner.timing import Race, TimingPolicy
from xtat.runner.verify import Budget, Tolerance

REPLACEMENT_START_S = 120.0  # a replacement worker that is not running by then is given up


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
            replacement = self.pool.replacement(self.actor)
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
        self.pool.deadlines = (compile_s, measure_s)  # for replacement workers
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

    def __init__(self, starter: WorkerStarter, workers: int, export_rewritten: ExportRewritten,
                 layout_in_program: bool):
        import ray

        self._ray = ray
        self._starter = starter
        self._export_rewritten = export_rewritten
        self._layout_in_program = layout_in_program
        self._programs: dict[str, bytes] = {}
        self._live = starter.start(workers)
        self._lock = threading.Lock()
        self._closed = False
        self.deadlines: tuple[float, float] | None = None  # the latest the slots were given
        self.slots = [RaySlot(self, actor, node) for actor, node in self._live]

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

    def replacement(self, lost_actor: Any) -> tuple[Any, str] | None:
        """A worker to take the lost one's place: a new one where the cluster has room for it, else a
        live one (shared from then on); None when none is left, or when the run has ended (a slot's
        thread may still be measuring while the run stops: `SearchLoop.abandon`)."""
        with self._lock:
            if self._closed:
                return None
            self._live = [(a, n) for a, n in self._live if a is not lost_actor]
            started = self._starter.one_more(self.deadlines)
            if started is not None:
                self._live.append(started)
                return started
            for actor, node in list(self._live):
                try:
                    self.get(actor.describe.remote())
                    return actor, node
                except WorkerLost:
                    self._live.remove((actor, node))
            return None

    def close(self) -> None:
        with self._lock:
            self._closed = True
        for actor, _ in self._live:
            try:
                self._ray.kill(actor)
            except Exception:  # already gone with its node
                pass


def connect(executor: Executor, workers: int) -> bool:
    """Join the cluster the executor names; True if this call connected (the run's end disconnects it,
    and stops a local cluster it started; a cluster it joined runs on), False if this process already was.

    `ray`: the cluster of $RAY_ADDRESS or one already running on this machine, else a new local one
    with a CPU for each of the `workers` (timings on one host take turns: `runner.host_lock`).
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
            return True
        try:
            ray.init(address="auto", logging_level=logging.ERROR, log_to_driver=False)
            return True
        except ConnectionError:
            ray.init(num_cpus=workers, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
            return True
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise UserError(f"--executor {executor}: cannot join the Ray cluster ({str(exc).splitlines()[0]}); start it "
                        "with `ray start --head` and join it with --executor ray:HEAD_IP:6379") from exc


def _ignoring_devices(env: dict[str, str]) -> dict[str, str]:
    """An environment less its device count: a worker sees the devices it was given (on GPU Ray's
    share of the node), not the tuner's."""
    return {key: value for key, value in env.items() if key != DEVICES}


class WorkerStarter:
    """Starts a run's workers on the cluster: each an actor of `worker_class` holding one CPU (and on GPU
    `devices` GPUs) for its life, spread over the nodes. A worker whose node's environment is not `env`
    (None: not checked) is refused."""

    def __init__(self, worker_class: type, args: tuple, env: dict | None, devices: int = 1):
        import ray

        self._ray = ray
        self._env = env
        on_gpu = env is not None and env.get("platform") in GPU_PLATFORMS
        # On GPU Ray sets each actor's CUDA_VISIBLE_DEVICES to its own GPUs, so two actors of a node
        # never time on the same one (`runner.host_lock`).
        self._resource, self._per_worker = ("GPU", devices) if on_gpu else ("CPU", 1)
        self._remote: Any = ray.remote(num_cpus=1, num_gpus=devices if on_gpu else 0, max_restarts=0,
                                       scheduling_strategy="SPREAD")(worker_class)
        self._refs = [ray.put(arg) for arg in args]

    def start(self, workers: int) -> list[tuple[Any, str]]:
        """`workers` started and loaded; refused if the cluster cannot hold that many."""
        total = self._ray.cluster_resources().get(self._resource, 0)
        if total < workers * self._per_worker:
            raise UserError(f"--workers {workers}: the Ray cluster offers {total:g} {self._resource}(s) and each "
                            f"worker holds {self._per_worker}; lower --workers or add nodes")
        actors: list[Any] = [self._remote.remote(*self._refs) for _ in range(workers)]
        described = self._ray.get([actor.describe.remote() for actor in actors])
        wrong = [d for d in described if not self._fits(d["env"])]
        if wrong:
            for actor in actors:
                self._ray.kill(actor)
            differences = environment_differences(_ignoring_devices(self._env or {}),
                                                  _ignoring_devices(wrong[0]["env"]))
            raise UserError(f"Ray node {wrong[0]['node']} does not run the workload's environment ({differences}): "
                            "install the same jax and jaxlib on every node, or tune on a cluster of this environment")
        self._ray.get([actor.start.remote() for actor in actors])
        return [(actor, d["node"]) for actor, d in zip(actors, described, strict=True)]

    def _fits(self, env: dict[str, str]) -> bool:
        return self._env is None or _ignoring_devices(env) == _ignoring_devices(self._env)

    def one_more(self, deadlines: tuple[float, float] | None) -> tuple[Any, str] | None:
        """A replacement worker, started, loaded and given the run's `deadlines` where the cluster has room
        for one; None where it has none, or the worker does not start in time or runs another environment."""
        from ray.exceptions import GetTimeoutError, RayActorError

        if self._ray.available_resources().get(self._resource, 0) < self._per_worker:
            return None
        actor = self._remote.remote(*self._refs)
        try:
            described = self._ray.get(actor.describe.remote(), timeout=REPLACEMENT_START_S)
            if self._fits(described["env"]):
                self._ray.get(actor.start.remote(), timeout=REPLACEMENT_START_S)
                if deadlines is not None:
                    self._ray.get(actor.set_deadlines.remote(*deadlines), timeout=REPLACEMENT_START_S)
                return actor, described["node"]
        except (GetTimeoutError, RayActorError):
            pass
        self._ray.kill(actor)
        return None


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
