"""A program where a fusion barrier pays on CPU: a transpose feeding row reductions.

XLA fuses the transpose into each reduction, so every reduction walks the
input column-wise. A barrier after the transpose makes XLA materialise the
transposed array once (a tiled copy) and reduce it row-wise. On CPU the
barrier only survives with the `cse_barrier_expander` pass disabled, so a
formulation must set a passes-stage decision and a program-stage decision
together to find it (`joint` can; `staged`, which freezes program decisions
before it searches passes, cannot).

    xtat tune benchmarks/fusion_barrier.py:transposed_reductions --stages program,passes --formulation joint
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

import xtat

N = 2048


def _inputs(seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    return (jnp.asarray(rng.standard_normal((N, N)), jnp.float32), jnp.asarray(rng.standard_normal(N), jnp.float32))


def reductions(x, w):
    y = jnp.transpose(x) * 2.0 + 1.0
    return y.sum(1), (y * w).sum(1)


def transposed_reductions() -> xtat.Workload:
    return xtat.Workload(reductions, _inputs(0), name="transposed_reductions", make_inputs=_inputs)
