"""Worker processes, one per process setup, killed as a group on deadline."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from xtat.core.candidate import ProcessSetup
from xtat.core.status import TrialStatus
from xtat.runner import protocol
from xtat.runner.base import WorkerFailure


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_PARENT_VARIABLE = "XTAT_TUNER_PID"
# Every worker is started from this one thread, which lives as long as the tuner. Linux sends the
# parent-death signal when the *thread* that started a child exits, not its process: workers
# started from a tuning slot's thread were killed (SIGKILL, read as out-of-memory) once the
# search's slot threads ended, and the finalists' re-timing found them dead.
_SPAWNER = ThreadPoolExecutor(1, thread_name_prefix="xtat-worker-spawner")


def die_with_parent() -> None:
    """Called by a worker at start-up: on Linux the kernel kills it (SIGKILL) when the
    tuner (the thread that started it: `_SPAWNER`) dies, even by SIGKILL while the
    worker is mid-compile or hung, so no orphan outlives its tuner. Elsewhere a
    worker notices only at its next read of the closed pipe. (Not in the parent's
    preexec_fn: forking a multithreaded JAX process and running Python code before
    exec can deadlock.)"""
    parent = os.environ.get(_PARENT_VARIABLE)
    if parent is None or not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(parent):  # the tuner died before the line above
        os._exit(1)


class WorkerProcess:
    """One `python -m xtat.runner.worker` in its own process group."""

    def __init__(self, setup: ProcessSetup, log_path: Path, device: str | None = None):
        self.log_path = log_path
        self._log = open(log_path, "ab")
        base = os.environ.copy()
        # Compile times must be real: no persistent compilation cache while tuning.
        base.pop("JAX_COMPILATION_CACHE_DIR", None)
        base["JAX_ENABLE_COMPILATION_CACHE"] = "false"
        base["PYTHONUNBUFFERED"] = "1"
        base[_PARENT_VARIABLE] = str(os.getpid())
        if device is not None:  # one GPU per worker: it times on that one and holds memory on no other
            base["CUDA_VISIBLE_DEVICES"] = device
            # jax takes 75% of a GPU's memory at start by default; several workers (and the tuner) share
            # the device, so each takes what it uses and gives it back when it is closed.
            base["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        self.process = _SPAWNER.submit(
            subprocess.Popen,
            [sys.executable, "-m", "xtat.runner.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**base, **setup.variables()},  # the worker enters its setup before jax starts
            start_new_session=True,  # its own process group, killed as one
        ).result()
        self._buffer = b""
        self.builds: set[str] = set()  # the ids of the builds it holds (compiled or deployed, not released)

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def request(self, request: protocol.Request, deadline_s: float) -> protocol.Reply:
        """Send one request and wait for its reply until the deadline."""
        message = protocol.encode(request) + "\n"
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(message.encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died() from None
        end = time.monotonic() + deadline_s
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = end - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise WorkerFailure(TrialStatus.TIMEOUT,
                                    f"{request.op} did not finish within its deadline of {deadline_s:.1f} s")
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise self._died()
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        reply = protocol.decode_reply(line.decode())
        if isinstance(request, (protocol.Compile, protocol.Deploy)) and not isinstance(reply, protocol.Failed):
            self.builds.add(request.id)
        elif isinstance(request, protocol.Release):
            self.builds.difference_update(request.ids)
        return reply

    def _died(self) -> WorkerFailure:
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.process.returncode
        tail = self.log_tail()
        self.kill()
        if code is not None and code < 0:
            name = _signal_name(-code)
            # SIGKILL that we did not send is the kernel's out-of-memory killer.
            status = TrialStatus.OOM if -code == signal.SIGKILL else TrialStatus.CRASH
            return WorkerFailure(status, f"worker killed by {name}. {tail}".strip())
        return WorkerFailure(TrialStatus.CRASH, f"worker exited with code {code}. {tail}".strip())

    def log_tail(self, chars: int = 1500) -> str:
        try:
            text = self.log_path.read_bytes()[-chars:].decode(errors="replace")
        except OSError:
            return ""
        lines = [line for line in text.splitlines() if line.strip() and "Warning" not in line]
        return " | ".join(lines[-6:])

    def kill(self) -> None:
        """SIGTERM, a short grace, then SIGKILL to the whole process group."""
        if self.process.poll() is None:
            for sig, grace in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self.process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.process.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
        else:  # the leader is gone; children of its group may linger
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for stream in (self.process.stdin, self.process.stdout):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass
        self._log.close()

    def close(self) -> None:
        if self.alive():
            try:
                self.request(protocol.Exit(), 0.1)
            except (WorkerFailure, OSError, ValueError):
                pass
        self.kill()


class Pool:
    """Long-lived workers, one per process setup; a dead one is replaced on demand. A candidate's
    worker is started only after the least recently used are closed down to `MAX_WORKERS` (each set
    of autotune results is a process of its own, and each holds device memory)."""

    MAX_WORKERS = 4

    def __init__(self, log_dir: Path, device: str | None = None):
        self.log_dir = log_dir
        self.device = device
        self._workers: dict[ProcessSetup, WorkerProcess] = {}
        self._started = 0
        # A tuning slot's thread may still ask for a worker while the run's end closes the pool
        # (`SearchLoop.abandon`): it gets a failure, not a new worker that nobody would close.
        self._lock = threading.Lock()
        self._closed = False

    def get(self, setup: ProcessSetup = ProcessSetup()) -> tuple[WorkerProcess, bool]:
        """The live worker for this setup, and whether it was just started."""
        worker = self._workers.get(setup)
        if worker is not None and worker.alive():
            self._workers[setup] = self._workers.pop(setup)  # most recently used last
            return worker, False
        if worker is not None:
            worker.kill()
        # Only here, one candidate at a time: `fresh` alone serves placements, whose workers are all in use.
        while len(self._workers) >= self.MAX_WORKERS:
            self._workers.pop(next(iter(self._workers))).close()
        return self.fresh(setup), True

    def live(self, setup: ProcessSetup = ProcessSetup()) -> WorkerProcess | None:
        """The worker for this setup if it is running (nothing is started)."""
        worker = self._workers.get(setup)
        return worker if worker is not None and worker.alive() else None

    def fresh(self, setup: ProcessSetup = ProcessSetup()) -> WorkerProcess:
        old = self._workers.pop(setup, None)
        if old is not None:
            old.close()
        with self._lock:
            self._refuse_if_closed()
            self._started += 1
            worker = WorkerProcess(setup, self.log_dir / f"worker-{self._started}.log", self.device)
            self._workers[setup] = worker
        return worker

    def spare(self, setup: ProcessSetup, name: str) -> WorkerProcess:
        """A worker outside the pool (the caller closes it), logged to `name`.log."""
        with self._lock:
            self._refuse_if_closed()
            return WorkerProcess(setup, self.log_dir / f"{name}.log", self.device)

    def _refuse_if_closed(self) -> None:
        if self._closed:
            raise WorkerFailure(TrialStatus.CRASH, "the run has ended: no worker is started")

    def pids(self) -> list[int]:
        return [worker.process.pid for worker in self._workers.values() if worker.alive()]

    def discard(self, setup: ProcessSetup = ProcessSetup()) -> None:
        worker = self._workers.pop(setup, None)
        if worker is not None:
            worker.kill()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = list(self._workers.values())
            self._workers.clear()
        for worker in workers:
            worker.close()
