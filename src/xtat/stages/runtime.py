"""Runtime stage: the worker process's CPU affinity, which sets XLA's thread pool size.

There is no thread-count option in XLA:CPU: the Eigen pool follows the CPU
affinity at process start, so the decision is applied to the worker's
environment (`XTAT_CPUS`, read by the worker before jax is imported) and, in
production, printed by `xtat apply --print` as a `taskset` line.
"""

from __future__ import annotations

import os

from xtat.space.space import Config, Decision
from xtat.stages.base import Candidate, Context

CPUS = "cpus"
ENV_CPUS = "XTAT_CPUS"


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
        return [Decision(self.name, CPUS, values, count)]

    def apply(self, values: dict[str, object], candidate: Candidate) -> Candidate:
        if CPUS not in values:
            return candidate
        cpus = ",".join(map(str, cpu_list(int(values[CPUS]))))  # type: ignore[arg-type]
        return Candidate(candidate.program, candidate.compile_options, (*candidate.env, (ENV_CPUS, cpus)))
