"""A program where a fusion barrier pays on CPU: an elementwise chain feeding a gather.

`table_lookup` evaluates a degree-24 polynomial over a 100k-entry table, then
gathers 4M entries from it (an embedding lookup of a transformed table). XLA
fuses the polynomial into the gather, so every gathered element recomputes
it: 4M x 24 multiply-adds instead of 100k. A `lax.optimization_barrier` on the
edge makes XLA materialise the table once. On CPU the barrier only survives
with the `cse_barrier_expander` pass disabled, so a formulation must set a
passes-stage decision and a program-stage decision together to find it
(`joint` can; `staged`, which freezes program decisions before it searches
passes, cannot).

    xtat tune benchmarks/fusion_barrier.py:table_lookup --stages program,passes --formulation joint
    xtat tune benchmarks/fusion_barrier.py:table_lookup --stages program,passes --formulation staged
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

import xtat

TABLE, LOOKUPS, DEGREE = 100_000, 4_000_000, 24


def _inputs(seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    table = jnp.asarray(rng.uniform(-1.0, 1.0, TABLE), jnp.float32)
    return table, jnp.asarray(rng.integers(0, TABLE, LOOKUPS), jnp.int32)


def lookup(table, ids):
    acc = table
    for k in range(DEGREE):  # Horner's rule: cheap ops, each alone not "expensive" to XLA
        acc = acc * table + 0.1 * k
    return jnp.take(acc, ids)


def table_lookup() -> xtat.Workload:
    return xtat.Workload(lookup, _inputs(0), name="table_lookup", make_inputs=_inputs)
