"""The stages and the worker session of a run: what turns a config into a candidate, and the
workers that build and time candidates of one captured workload."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from xtat.capture.arguments import export_flat
from xtat.capture.source import Source, is_source
from xtat.capture.workload import Capture
from xtat.core.errors import UserError
from xtat.runner.host_lock import host_locks, measured_device
from xtat.runner.process import OWNER_FILE, ExportRewritten, ProcessRunner
from xtat.tuning.settings import TuneSettings


def rewritten_exporter(captured: Capture) -> ExportRewritten:
    """Exports the workload's program with a set of program-stage rewrites applied, traced in a layout's
    placement when one is given (marked intermediates laid out by it: `xtat.constrain`); for a program
    with host callbacks, its source with the rewrites and layout to apply in the worker."""
    if is_source(captured.exported):
        source = Source.from_bytes(captured.exported)
        return lambda program, layout: source.with_decisions(program, layout).to_bytes()
    workload = captured.workload

    def export(program: dict, layout: str) -> bytes:
        from xtat.stages.program import rewrite
        from xtat.stages.sharding.layouts import Layout, in_placement, shardings

        try:
            fn, args, kwargs = workload.bound()
            fn = rewrite(fn, program) if program else fn
            if not layout:
                return export_flat(fn, args, kwargs, captured.leaves)
            parsed = Layout.parse(layout)
            return export_flat(in_placement(fn, parsed), args, kwargs, captured.leaves,
                               shardings(parsed, captured.dims))
        except UserError:
            raise
        except Exception as exc:  # e.g. a knob choice that adds a host callback, which jax.export refuses
            raise UserError(f"the program this config rewrites cannot be exported for isolated measurement: "
                            f"{type(exc).__name__}: {str(exc)[:300]}") from exc

    return export


def called_source(captured: Capture) -> Source | None:
    """Where workers import the user's function from to call it as the user does
    (`runner.base.Deployment.as_called`): the workload's source, unless it stands for a program
    compiled elsewhere (`Workload.keyed_as`), whose trace the source need not give."""
    workload = captured.workload
    if workload.source is None or workload.keyed_as is not None:
        return None
    return Source(workload.source, captured.identity.program, {}, tuple(sys.path))


def worker_devices(settings: TuneSettings) -> int:
    """How many of this process's devices a GPU worker sees: all of them when the sharding stage lays
    programs out over them, else one (to time on it without holding memory on the others)."""
    import jax

    from xtat.stages.sharding import SHARDING

    return jax.device_count() if SHARDING in settings.stages else 1


@contextmanager
def open_runner(captured: Capture, settings: TuneSettings, *, verify_inputs: bool = True,
                 prefix: str = "xtat-run-") -> Iterator[ProcessRunner]:
    """Workers for `captured` in a private folder; every worker stops and the folder goes on exit.
    Without `verify_inputs` the second input set is not sent (nothing will be re-verified)."""
    remove_abandoned_folders()
    platform = captured.identity.env["platform"]
    device = measured_device(platform, worker_devices(settings))
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    (folder / OWNER_FILE).write_text(str(os.getpid()))
    runner = ProcessRunner(folder, captured.exported, captured.inputs,
                      captured.verify_inputs if verify_inputs else None, rewritten_exporter(captured),
                      settings.startup_deadline_s, settings.deadline_factor, settings.min_deadline_s,
                      host_locks(platform, device), device, captured.dims, bool(captured.marks),
                      settings.compile_slots, called_source(captured))
    try:
        yield runner
    finally:
        runner.close()
        shutil.rmtree(folder, ignore_errors=True)



def remove_abandoned_folders() -> None:
    """Remove the run folders of killed runs (their owner process is gone): a SIGKILLed tuner
    cannot clean up after itself, so the next run does. Only folders with an owner file,
    which only `open_runner` writes, and only this user's, are touched."""
    for owner in Path(tempfile.gettempdir()).glob(f"xtat-*/{OWNER_FILE}"):
        try:
            if owner.stat().st_uid != os.getuid():
                continue
            pid = int(owner.read_text() or 0)
            if pid == os.getpid():
                continue
            os.kill(pid, 0)  # alive (or not ours to signal): leave it
        except ProcessLookupError:
            shutil.rmtree(owner.parent, ignore_errors=True)
        except (OSError, ValueError):
            continue


@contextmanager
def open_ray_runner(captured: Capture, settings: TuneSettings, worker_class: type | None = None,
                    local_runner: Callable[..., Any] | None = None) -> Iterator[Any]:
    """A `RayRunner` for `captured` (a `tuner.RunnerFactory`): workers on the cluster of
    `settings.executor` (by default `runner.ray.NodeWorker`s), the local part from `local_runner` (by default
    `open_runner`)."""
    import ray

    from xtat.runner.ray import NodeWorker, RayPool, RayRunner, WorkerStarter, connect

    connected = connect(settings.measured_by, settings.workers)
    pool = None
    try:
        with (local_runner or open_runner)(captured, settings) as local:
            env = captured.identity.env
            deadlines = (settings.startup_deadline_s, settings.deadline_factor, settings.min_deadline_s)
            devices = worker_devices(settings)
            starter = WorkerStarter(worker_class or NodeWorker,
                                    (captured.exported, captured.inputs, captured.verify_inputs, env["platform"],
                                     deadlines, captured.dims, bool(captured.marks), devices), env, devices)
            pool = RayPool(starter, settings.workers, rewritten_exporter(captured), bool(captured.marks))
            yield RayRunner(local, pool)
    finally:
        if pool is not None:
            pool.close()
        if connected:  # disconnected before the command's results are written
            ray.shutdown()
