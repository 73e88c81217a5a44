"""Runtime stage: the worker process's CPU affinity and host device count.

There is no thread-count option in XLA:CPU: the Eigen pool follows the CPU
affinity at process start, so the decision is applied to the worker's
environment (`XTAT_CPUS`, read by the worker before jax is imported) and, in
production, printed by `xtat apply --print` as a `taskset` line. The host
device count (`--xla_force_host_platform_device_count`) is read once per
process from XLA_FLAGS, so it too is a worker environment (`XTAT_HOST_DEVICES`).
A single-device program compiles to the same machine code under any count,
but runs beside other host devices' runtimes, so it is measured like the
affinity: same code, other environment, another candidate.
"""

from __future__ import annotations

import os

from xtat.space.space import Config, Decision
from xtat.stages.base import Candidate, Context

CPUS = "cpus"
ENV_CPUS = "XTAT_CPUS"
HOST_DEVICES = "host_devices"
ENV_HOST_DEVICES = "XTAT_HOST_DEVICES"
HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count"


def with_host_devices(xla_flags: str, count: int) -> str:
    """XLA_FLAGS with the host device count set to `count` (any earlier setting replaced)."""
    kept = [flag for flag in xla_flags.split() if not flag.startswith(HOST_DEVICES_FLAG + "=")]
    return " ".join([*kept, f"{HOST_DEVICES_FLAG}={count}"])


def available_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def cpu_list(count: int) -> list[int]:
    return available_cpus()[:count]


class RuntimeStage:
    name = "runtime"

    def discover(self, context: Context, frozen: Config, earlier: list[Decision]) -> list[Decision]:
        count = len(available_cpus())
        if count < 2:
            return []
        values = tuple(sorted({1, max(1, count // 2), count}))
        return [Decision(self.name, CPUS, values, count), Decision(self.name, HOST_DEVICES, (1, count), 1)]

    def apply(self, values: dict[str, object], candidate: Candidate) -> Candidate:
        env = list(candidate.env)
        if CPUS in values:
            env.append((ENV_CPUS, ",".join(map(str, cpu_list(int(values[CPUS]))))))  # type: ignore[arg-type]
        if HOST_DEVICES in values:
            env.append((ENV_HOST_DEVICES, str(values[HOST_DEVICES])))
        return Candidate(candidate.program, candidate.compile_options, tuple(env))
