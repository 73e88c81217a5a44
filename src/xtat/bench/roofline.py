"""The roofline of this machine and where each workload sits under it.

Peaks are measured once per machine (a large f32 matmul for FLOP/s, a
streaming elementwise pass for bytes/s, best of a few repeats under
`jax.jit`) and stored as a machine fact keyed by what they describe (device
kind, platform, host CPU model, core count), so later campaigns reuse them.

A workload sits at the arithmetic intensity of its default program
(`cost_analysis()` flops / bytes accessed, recorded at capture). Achieved
FLOP/s are those flops divided by the measured time of the default and of the
tuned config. XLA's cost analysis counts a loop body once, so programs with
while loops are left out, with the reason, and so is any point its counts
would put above the roof.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from xtat.store.base import TuningStorage

FACT_PREFIX = "roofline:"
# Problem sizes per platform: seconds in all on a 2-core CPU. The compute roof is the best
# over several matmul sizes: which size peaks depends on caches and on the BLAS-like kernel.
MATMUL_SIZES = {"cpu": (512, 1024, 2048), "gpu": (4096, 8192), "tpu": (4096, 8192)}
COPY_ELEMENTS = {"cpu": 1 << 25, "gpu": 1 << 28, "tpu": 1 << 28}  # well beyond the last-level cache


@dataclass(frozen=True)
class MachinePeak:
    key: str
    flops_per_s: float  # f32 matmul
    bytes_per_s: float  # read + write of a streaming elementwise pass
    matmul_n: int  # the size that reached flops_per_s
    copy_bytes: int
    repeats: int
    measured_at: float

    @property
    def ridge_intensity(self) -> float:
        """FLOP per byte where the memory roof meets the compute roof."""
        return self.flops_per_s / self.bytes_per_s

    def roof(self, intensity: float) -> float:
        """The attainable FLOP/s at an arithmetic intensity."""
        return min(self.flops_per_s, intensity * self.bytes_per_s)


@dataclass(frozen=True)
class RooflinePlacement:
    """One workload under the roof."""

    intensity: float  # flops / bytes accessed
    flops: float
    bytes_accessed: float
    default_flops_per_s: float
    tuned_flops_per_s: float
    default_fraction: float  # of the roof at this intensity
    tuned_fraction: float


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_key() -> str:
    """What the peaks describe: accelerator kind and platform, host CPU model and core count."""
    import jax

    device = jax.devices()[0]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{FACT_PREFIX}{device.platform}|{device.device_kind}|{_cpu_model()}|{cores} cores"


def _best_seconds(step: Callable, state: Any, repeats: int) -> float:
    """Best wall time of `state = step(state)`; step donates its input, so no call pays for
    fresh pages of a new output buffer (that cost, not bandwidth, dominates otherwise)."""
    state = step(state)  # compile and warm up
    state.block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        state = step(state)
        state.block_until_ready()
        best = min(best, time.perf_counter() - start)
    return best


def measure_peak(repeats: int = 5) -> MachinePeak:
    """Measure the peak FLOP/s and bytes/s of the default device now (seconds on a CPU).

    Best of `repeats` per problem: a peak is the best case, and the best of many
    runs is the least disturbed by whatever else shares the machine.
    """
    import jax
    import jax.numpy as jnp

    kind = jax.devices()[0].platform
    sizes, elements = MATMUL_SIZES.get(kind, MATMUL_SIZES["gpu"]), COPY_ELEMENTS.get(kind, COPY_ELEMENTS["gpu"])
    flops_per_s, matmul_n = 0.0, sizes[0]
    for n in sizes:
        # Scaled by 1/sqrt(n) so repeated products of a standard normal matrix stay near unit scale.
        matmul = jax.jit(lambda x, n=n: (x @ x) * (1.0 / n**0.5), donate_argnums=0)
        a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
        rate = 2.0 * n**3 / _best_seconds(matmul, a, repeats)
        if rate > flops_per_s:
            flops_per_s, matmul_n = rate, n
    # v + 1 reads and writes every element once and cannot be elided.
    stream = jax.jit(lambda v: v + 1.0, donate_argnums=0)
    copy_bytes = 2 * elements * 4
    bytes_per_s = copy_bytes / _best_seconds(stream, jnp.zeros((elements,), jnp.float32), repeats)
    return MachinePeak(machine_key(), flops_per_s, bytes_per_s, matmul_n, copy_bytes, repeats, time.time())


def machine_peak(store: TuningStorage, remeasure: bool = False) -> tuple[MachinePeak, bool]:
    """This machine's peaks from the store, measured and stored first if absent.

    Returns the peaks and whether they were measured now.
    """
    key = machine_key()
    fact = None if remeasure else store.machine_fact(key)
    if fact is not None and set(fact) == {f.name for f in fields(MachinePeak)}:  # else: an older layout
        return MachinePeak(**fact), False
    peak = measure_peak()
    store.set_machine_fact(key, asdict(peak))
    return peak, True


def place(peak: MachinePeak, cost: dict, default_s: float, tuned_s: float) -> tuple[RooflinePlacement | None,
                                                                                 str | None]:
    """Where a workload with this cost analysis and these times sits, or why it is left out.

    Left out: no flops or bytes in the cost analysis; a program with while
    loops (scan, fori_loop, while), whose bodies XLA's cost analysis counts
    once, so its flops are not what runs; and any point that would sit above
    the roof, which no program can, so its counts do not describe it.
    """
    flops, accessed = cost.get("flops", 0.0), cost.get("bytes accessed", 0.0)
    if not flops or not accessed or default_s <= 0 or tuned_s <= 0:
        return None, "no flops or bytes in XLA's cost analysis"
    loops = int(cost.get("while_loops", 0))
    if loops:
        return None, f"{loops} while loop(s), whose bodies XLA's cost analysis counts once"
    intensity = flops / accessed
    roof = peak.roof(intensity)
    default_rate, tuned_rate = flops / default_s, flops / tuned_s
    placement = RooflinePlacement(intensity, flops, accessed, default_rate, tuned_rate, default_rate / roof,
                                  tuned_rate / roof)
    if max(placement.default_fraction, placement.tuned_fraction) > 1.0:
        return None, (f"its counts would put it at {max(placement.default_fraction, placement.tuned_fraction):.0%} "
                      "of the roof, which no program reaches: XLA's cost analysis does not describe what runs")
    return placement, None
