"""What a runner builds: a config made concrete by the stages (`Candidate`), and what its process
must be started with (`ProcessSetup`: CPU count and host device count).

XLA:CPU sizes its thread pool by the CPU affinity at start and reads XLA_FLAGS (the host
device count) once, so neither can change in a running process. A measuring worker and a
production process started by `xtat run` enter the same `ProcessSetup` the same way
(`enter`, before jax is imported); `xtat.jit` can only say how its own process differs
(`mismatch`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace

from xtat.errors import UserError

HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count"
VARIABLE = "XTAT_PROCESS_SETUP"  # how a parent hands a setup to a worker it starts


def with_host_devices(xla_flags: str, count: int) -> str:
    """XLA_FLAGS with the host device count set to `count` (any earlier setting replaced)."""
    kept = [flag for flag in xla_flags.split() if not flag.startswith(HOST_DEVICES_FLAG + "=")]
    return " ".join([*kept, f"{HOST_DEVICES_FLAG}={count}"])


def available_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


@dataclass(frozen=True)
class ProcessSetup:
    cpus: int | None = None  # use the first `cpus` CPUs this process may use (None: all of them)
    host_devices: int | None = None  # XLA:CPU host devices (None: jax's default, one)

    def __bool__(self) -> bool:
        return self.cpus is not None or self.host_devices is not None

    def to_json(self) -> dict[str, int]:
        return {k: v for k, v in (("cpu_count", self.cpus), ("host_device_count", self.host_devices))
                if v is not None}

    def environment(self, base: dict[str, str]) -> dict[str, str]:
        """`base` as a process entering this setup sees it (XLA_FLAGS with the device count)."""
        env = dict(base)
        if self.host_devices is not None:
            env["XLA_FLAGS"] = with_host_devices(base.get("XLA_FLAGS", ""), self.host_devices)
        return env

    def affinity(self) -> tuple[int, ...] | None:
        if self.cpus is None:
            return None
        available = available_cpus()
        if self.cpus > len(available):
            raise UserError(f"tuned with {self.cpus} CPUs; this process may use only {len(available)}")
        return tuple(available[: self.cpus])

    def enter(self) -> None:
        """Apply the setup to this process; call before jax is imported."""
        affinity = self.affinity()
        if affinity is not None:
            os.sched_setaffinity(0, affinity)
        os.environ.update(self.environment(dict(os.environ)))

    def describe(self) -> str:
        parts = []
        if self.cpus is not None:
            parts.append(f"CPU affinity {','.join(map(str, self.affinity() or ()))} ({self.cpus} CPU(s))")
        if self.host_devices is not None:
            parts.append(f"XLA_FLAGS {HOST_DEVICES_FLAG}={self.host_devices}")
        return " and ".join(parts) or "no process setup"

    def launch_environment(self) -> dict[str, object]:
        """What a launcher sets: the CPUs of the affinity and XLA_FLAGS."""
        environment: dict[str, object] = {}
        if self.cpus is not None:
            environment["cpu_affinity"] = list(self.affinity() or ())
        if self.host_devices is not None:
            environment["XLA_FLAGS"] = f"{HOST_DEVICES_FLAG}={self.host_devices}"
        return environment

    def launch_prefix(self) -> str:
        """A shell prefix that starts a program in this setup without xtat."""
        parts = [f"XLA_FLAGS={HOST_DEVICES_FLAG}={self.host_devices}"] if self.host_devices is not None else []
        if self.cpus is not None:
            parts.append(f"taskset -c {','.join(map(str, self.affinity() or ()))}")
        return " ".join(parts)

    def mismatch(self, local_devices: int) -> str | None:
        """How this running process (with `local_devices` CPU devices) differs from the setup, if it does."""
        differences = []
        have = len(available_cpus())
        if self.cpus is not None and self.cpus != have:
            differences.append(f"tuned with {self.cpus} CPU(s), this process has {have}")
        if self.host_devices is not None and self.host_devices != local_devices:
            differences.append(f"tuned with {self.host_devices} host device(s), this process has {local_devices}")
        if not differences:
            return None
        return ("; ".join(differences) + ": a process cannot change these once jax has started; "
                "start it with `xtat run -- python your_script.py ...`, which sets them")

    # -- handing a setup to a child process ------------------------------------------------

    def variables(self) -> dict[str, str]:
        return {VARIABLE: json.dumps(self.to_json(), sort_keys=True)} if self else {}

    @classmethod
    def from_environment(cls) -> ProcessSetup:
        text = os.environ.get(VARIABLE)
        if not text:
            return cls()
        values = json.loads(text)
        return cls(values.get("cpu_count"), values.get("host_device_count"))


@dataclass(frozen=True)
class Candidate:
    """A config made concrete: program rewrites (applied when the function is traced), compile
    options (when it is compiled) and a process setup (when its process starts)."""

    program: dict[str, object] = field(default_factory=dict)  # program-stage decisions (rewrites)
    compile_options: dict[str, object] = field(default_factory=dict)
    process: ProcessSetup = ProcessSetup()

    def with_options(self, **options: object) -> Candidate:
        return replace(self, compile_options={**self.compile_options, **options})
