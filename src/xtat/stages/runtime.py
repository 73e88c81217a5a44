"""Runtime stage: the process's CPU count and host device count.

There is no thread-count option in XLA:CPU: the Eigen pool follows the CPU
affinity at process start; the host device count
(`--xla_force_host_platform_device_count`) is read once per process from
XLA_FLAGS. So both decisions become the candidate's `ProcessSetup`, entered by
the worker before jax is imported and, in production, by `xtat run`. A
single-device program compiles to the same machine code under any count, but
runs beside other host devices' runtimes, so it is measured like the affinity:
same code, other process, another candidate.
"""

from __future__ import annotations

from dataclasses import replace

from xtat.core.candidate import Candidate, available_cpus
from xtat.core.space import Config, Decision
from xtat.stages.base import Context

CPUS = "cpus"
HOST_DEVICES = "host_devices"
_MAX_HOST_DEVICES = 4096


def runtime_decisions() -> list[Decision]:
    """The CPU counts and host device counts offered to a process on this machine (none on one CPU)."""
    count = len(available_cpus())
    if count < 2:
        return []
    values = tuple(sorted({1, max(1, count // 2), count}))
    return [Decision(RuntimeStage.name, CPUS, values, count), Decision(RuntimeStage.name, HOST_DEVICES, (1, count), 1)]


class RuntimeStage:
    name = "runtime"

    def __init__(self, earlier: tuple = ()) -> None:
        pass

    def notes(self) -> list[str]:
        return []

    def discover(self, context: Context, frozen: Config, earlier: list[Decision]) -> list[Decision]:
        return runtime_decisions()

    def apply(self, values: dict[str, object], candidate: Candidate) -> Candidate:
        if not values:
            return candidate
        cpus, devices = values.get(CPUS), values.get(HOST_DEVICES)
        return replace(candidate, process=replace(candidate.process, cpus=_count(cpus), host_devices=_count(devices)))

    def vet(self, values: dict[str, object], platform: str, numerics_opt_in: bool) -> list[str]:
        """A CPU count this process can have, a positive host device count."""
        found = []
        for name, value in values.items():
            if name not in (CPUS, HOST_DEVICES):
                found.append(f"runtime decision {name!r} is unknown")
            elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
                found.append(f"runtime {name}={value!r} is not a positive count")
            elif name == CPUS and value > len(available_cpus()):
                found.append(f"runtime cpus={value} exceeds the {len(available_cpus())} CPUs of this process")
            elif name == HOST_DEVICES and value > _MAX_HOST_DEVICES:
                found.append(f"runtime host_devices={value} is beyond {_MAX_HOST_DEVICES}")
        return found


def _count(value: object) -> int | None:
    """A runtime decision's value as its count (None: not decided); vetting refused anything else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"a runtime count, not {value!r}")
    return int(value)
