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
from xtat.candidate import ProcessSetup
from xtat.errors import UserError
from xtat.store.sql import Store


@dataclass(frozen=True)
class RuntimePlan:
    """The process setup to enter, and the workloads it was adopted for."""

    setup: ProcessSetup
    workloads: tuple[str, ...]
    skipped: tuple[str, ...] = ()  # adopted elsewhere (another device or version) or refused: not applied

    def describe(self) -> str:
        if not self.setup:
            return "no runtime decision adopted for this machine; starting the program unchanged"
        return f"set {self.setup.describe()}, adopted for {', '.join(self.workloads)}"


def plan(store: Store, env: dict[str, str], workload: str | None = None) -> RuntimePlan:
    """The adopted process setup of the store's workloads tuned in this environment `env`.

    Workloads that disagree are refused unless one is named: a process has
    one affinity and one device count.
    """
    records = [store.find_workload(workload)] if workload else store.workloads()
    setups: dict[str, ProcessSetup] = {}
    skipped = []
    for record in records:
        result = store.latest_result(record.id)
        if result is None or not result.adopted:
            continue
        if record.env != env:
            skipped.append(f"{record.name} (tuned under another device or version)")
            continue
        try:
            setup = vetted(store, record, result).process
        except Unvetted as refusal:
            skipped.append(f"{record.name} ({refusal})")
            continue
        if setup:
            setups[record.name] = setup
    distinct = set(setups.values())
    if len(distinct) > 1:
        listed = "; ".join(f"{name}: {_said(setup)}" for name, setup in sorted(setups.items()))
        raise UserError(f"the workloads in the store were tuned for different runtime environments ({listed}); "
                        "name the one this program runs with --workload NAME")
    if not distinct:
        return RuntimePlan(ProcessSetup(), (), tuple(skipped))
    setup = distinct.pop()
    try:
        setup.affinity()
    except UserError as exc:
        raise UserError(f"{', '.join(setups)}: {exc}") from None
    return RuntimePlan(setup, tuple(sorted(setups)), tuple(skipped))


def _said(setup: ProcessSetup) -> str:
    return ", ".join(([f"{setup.cpus} CPU(s)"] if setup.cpus else [])
                     + ([f"{setup.host_devices} host device(s)"] if setup.host_devices else []))


def launch(runtime: RuntimePlan, command: list[str]) -> None:
    """Enter the plan's process setup and replace this process with `command`; returns only on failure."""
    runtime.setup.enter()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        raise UserError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from exc
