"""`xtat run`: start a program in the runtime environment its workloads were tuned for.

A process cannot change its CPU count for XLA (the thread pool follows the
affinity at start) or its host device count (XLA_FLAGS is read once) after
jax has started, so these decisions are applied by the launcher: it sets
its own affinity and environment and then replaces itself with the program
(`exec`), so signals, the exit status and the process id are the program's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from xtat.apply.lookup import Unvetted, vetted
from xtat.errors import UserError
from xtat.stages.runtime import ENV_CPUS, ENV_HOST_DEVICES, with_host_devices
from xtat.store.sqlite import Store


@dataclass(frozen=True)
class RuntimePlan:
    """The runtime decisions to apply, and the workloads they were adopted for."""

    cpus: tuple[int, ...] | None
    host_devices: int | None
    workloads: tuple[str, ...]
    skipped: tuple[str, ...] = ()  # adopted elsewhere (another device or version) or refused: not applied

    def environment(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        if self.host_devices is not None:
            env["XLA_FLAGS"] = with_host_devices(base.get("XLA_FLAGS", ""), self.host_devices)
        return env

    def describe(self, env: dict[str, str]) -> str:
        if self.cpus is None and self.host_devices is None:
            return "no runtime decision adopted for this machine; starting the program unchanged"
        parts = []
        if self.cpus is not None:
            parts.append(f"CPU affinity {','.join(map(str, self.cpus))} ({len(self.cpus)} CPU(s))")
        if self.host_devices is not None:
            parts.append(f"XLA_FLAGS={env['XLA_FLAGS']}")
        return f"set {' and '.join(parts)}, adopted for {', '.join(self.workloads)}"


def plan(store: Store, env: dict[str, str], workload: str | None = None) -> RuntimePlan:
    """The adopted runtime decisions of the store's workloads tuned in this environment `env`.

    Workloads that disagree are refused unless one is named: a process has
    one affinity and one device count.
    """
    records = [store.find_workload(workload)] if workload else store.workloads()
    decisions: dict[str, tuple[int | None, int | None]] = {}
    skipped = []
    for record in records:
        result = store.latest_result(record.id)
        if result is None or not result.adopted:
            continue
        if record.env != env:
            skipped.append(f"{record.name} (tuned under another device or version)")
            continue
        try:
            runtime = dict(vetted(store, record, result).env)
        except Unvetted as refusal:
            skipped.append(f"{record.name} ({refusal})")
            continue
        cpus = runtime.get(ENV_CPUS)
        devices = runtime.get(ENV_HOST_DEVICES)
        if cpus is None and devices is None:
            continue
        decisions[record.name] = (len(cpus.split(",")) if cpus else None, int(devices) if devices else None)
    distinct = set(decisions.values())
    if len(distinct) > 1:
        listed = "; ".join(f"{name}: {_said(*d)}" for name, d in sorted(decisions.items()))
        raise UserError(f"the workloads in the store were tuned for different runtime environments ({listed}); "
                        "name the one this program runs with --workload NAME")
    if not distinct:
        return RuntimePlan(None, None, (), tuple(skipped))
    cpu_count, host_devices = distinct.pop()
    available = sorted(os.sched_getaffinity(0))
    if cpu_count is not None and cpu_count > len(available):
        raise UserError(f"{', '.join(decisions)} was tuned with {cpu_count} CPUs; this process may use only "
                        f"{len(available)}")
    cpus = tuple(available[:cpu_count]) if cpu_count is not None else None
    return RuntimePlan(cpus, host_devices, tuple(sorted(decisions)), tuple(skipped))


def _said(cpus: int | None, devices: int | None) -> str:
    return ", ".join(([f"{cpus} CPU(s)"] if cpus else []) + ([f"{devices} host device(s)"] if devices else []))


def launch(runtime: RuntimePlan, command: list[str], env: dict[str, str]) -> None:
    """Apply the plan's affinity to this process and replace it with `command` in `env` (the plan's
    environment); returns only on failure."""
    if runtime.cpus is not None:
        os.sched_setaffinity(0, runtime.cpus)
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        raise UserError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from exc
