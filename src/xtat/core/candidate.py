"""What a runner builds: a config made concrete by the stages (`Candidate`), and what its process
must be started with (`ProcessSetup`: CPU count, host device count and, on GPU, the autotune results
XLA loads instead of autotuning).

XLA:CPU sizes its thread pool by the CPU affinity at start and reads XLA_FLAGS (the host
device count) once, and XLA:GPU loads an autotune-results file once per process, so none of them
can change in a running process. A measuring worker and a
production process started by `xtat run` enter the same `ProcessSetup` the same way
(`enter`, before jax is imported); `xtat.jit` can only say how its own process differs
(`mismatch`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from xtat.core.errors import UserError

HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count"
GPU_PLATFORMS = frozenset({"gpu", "cuda", "rocm"})  # jax's names of the platforms XLA:GPU serves
AUTOTUNE_FLAG = "--xla_gpu_load_autotune_results_from"
VARIABLE = "XTAT_PROCESS_SETUP"  # how a parent hands a setup to a worker it starts
# "BEFORE>AFTER": a setup changed the host device count from BEFORE to AFTER. Records are keyed by
# the count the process had before xtat's runtime decision (`capture.workload.environment_identity`).
DEVICES_VARIABLE = "XTAT_HOST_DEVICES"


def with_flag(xla_flags: str, flag: str, value: object) -> str:
    """XLA_FLAGS with `flag` set to `value` (any earlier setting replaced)."""
    kept = [f for f in xla_flags.split() if not f.startswith(flag + "=")]
    return " ".join([*kept, f"{flag}={value}"])


def with_host_devices(xla_flags: str, count: int) -> str:
    """XLA_FLAGS with the host device count set to `count` (any earlier setting replaced)."""
    return with_flag(xla_flags, HOST_DEVICES_FLAG, count)


def host_devices_of(env: dict[str, str]) -> int:
    """The CPU device count jax gives a process started with `env`: JAX_NUM_CPU_DEVICES where it is
    set (jax's own setting wins), else XLA_FLAGS's host device count, else one."""
    configured = env.get("JAX_NUM_CPU_DEVICES", "").strip()
    if configured.isdigit():
        return int(configured)
    for flag in reversed(env.get("XLA_FLAGS", "").split()):
        name, _, value = flag.partition("=")
        if name == HOST_DEVICES_FLAG and value.isdigit():
            return int(value)
    return 1


def devices_changed(env: Mapping[str, str]) -> tuple[str, str]:
    """What `DEVICES_VARIABLE` in `env` says: the host device count before xtat's setup changed it
    and the count the setup set, as written ("" for each when no setup changed it). Read as text:
    a value set by hand is checked where it is used."""
    before, _, after = env.get(DEVICES_VARIABLE, "").partition(">")
    return before, after


def autotune_file(text: str) -> Path:
    """The autotune results `text` as a file XLA can load, named by its content (written once)."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"xtat-autotune-{digest}.textproto"
    if not path.exists():
        partial = path.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(text)
        partial.replace(path)  # atomic: another process never loads half a file
    return path


def available_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


@dataclass(frozen=True)
class ProcessSetup:
    cpus: int | None = None  # use the first `cpus` CPUs this process may use (None: all of them)
    host_devices: int | None = None  # XLA:CPU host devices (None: jax's default, one)
    autotune_results: str = ""  # XLA:GPU autotune results to load instead of autotuning (xla.AutotuneResults text)

    def __bool__(self) -> bool:
        return self.cpus is not None or self.host_devices is not None or bool(self.autotune_results)

    @property
    def runtime(self) -> ProcessSetup:
        """The part that changes how the process runs any program (its CPUs, its host devices), as
        against what only changes its compiles (the autotune results)."""
        return ProcessSetup(self.cpus, self.host_devices)

    def to_json(self) -> dict[str, object]:
        return {k: v for k, v in (("cpu_count", self.cpus), ("host_device_count", self.host_devices),
                                  ("autotune_results", self.autotune_results or None)) if v is not None}

    def environment(self, base: dict[str, str]) -> dict[str, str]:
        """`base` as a process entering this setup sees it (XLA_FLAGS with the device count and the
        autotune results file, and the count it had before: `DEVICES_VARIABLE`)."""
        env = dict(base)
        if self.host_devices is not None:
            env["XLA_FLAGS"] = with_host_devices(env.get("XLA_FLAGS", ""), self.host_devices)
            before = devices_changed(base)[0] or str(host_devices_of(base))
            env[DEVICES_VARIABLE] = f"{before}>{self.host_devices}"
        if self.autotune_results:
            env["XLA_FLAGS"] = with_flag(env.get("XLA_FLAGS", ""), AUTOTUNE_FLAG,
                                         autotune_file(self.autotune_results))
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
        if self.autotune_results:
            parts.append(f"XLA's autotune results {hashlib.sha256(self.autotune_results.encode()).hexdigest()[:12]}")
        return " and ".join(parts) or "no process setup"

    def _flags(self) -> str:
        return self.environment({}).get("XLA_FLAGS", "")

    def launch_environment(self) -> dict[str, object]:
        """What a launcher sets: the CPUs of the affinity and XLA_FLAGS."""
        environment: dict[str, object] = {}
        if self.cpus is not None:
            environment["cpu_affinity"] = list(self.affinity() or ())
        if self._flags():
            environment["XLA_FLAGS"] = self._flags()
        return environment

    def launch_prefix(self) -> str:
        """A shell prefix that starts a program in this setup without xtat."""
        parts = [f"XLA_FLAGS={shlex.quote(self._flags())}"] if self._flags() else []
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
        return cls(values.get("cpu_count"), values.get("host_device_count"), values.get("autotune_results", ""))


@dataclass(frozen=True)
class Candidate:
    """A config made concrete: program rewrites (applied when the function is traced), compile
    options (when it is compiled) and a process setup (when its process starts)."""

    program: dict[str, object] = field(default_factory=dict)  # program-stage decisions (rewrites)
    compile_options: dict[str, object] = field(default_factory=dict)
    process: ProcessSetup = ProcessSetup()
    # The sharding stage's layout in Mesh-TF notation (`stages.sharding.layouts.Layout`): inputs placed
    # on its mesh, XLA's SPMD partitioner does the rest. "": jax's own placement, one device.
    layout: str = ""
    # In production: the dimension names of each flat dynamic input, recorded with the adopted layout.
    input_dims: tuple[tuple[str, ...] | None, ...] = ()

    def with_options(self, **options: object) -> Candidate:
        return replace(self, compile_options={**self.compile_options, **options})
