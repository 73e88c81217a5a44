"""Builder: executable identity ignores the options' own bytes, sees code changes."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import xtat
from tiny import FAST, tiny_nan_max
from xtat.build.builder import executable_identity
from xtat.store.sql import Store


def _lowered():
    return jax.jit(lambda w, x: jnp.tanh(x @ w).sum(axis=0)).lower(jnp.ones((64, 64)), jnp.ones((32, 64)))


def test_identity_is_stable_across_compiles_and_irrelevant_options():
    lowered = _lowered()
    default = executable_identity(lowered.compile())
    assert executable_identity(lowered.compile()) == default  # per-compile module ids do not leak in
    assert executable_identity(lowered.compile({"xla_cpu_collective_timeout_seconds": 7})) == default


def test_identity_changes_when_the_code_changes():
    lowered = _lowered()
    default = executable_identity(lowered.compile())
    assert executable_identity(lowered.compile({"xla_backend_optimization_level": 0})) != default
    assert executable_identity(lowered.compile({"xla_cpu_use_fusion_emitters": False})) != default


def test_identical_executables_reuse_one_measurement(db):
    xtat.tune(tiny_nan_max(), db=db, budget=4, options=("xla_cpu_experimental_ynn_fusion_type",), stages=("codegen",),
              **FAST)
    store = Store.open(db, read_only=True)
    trials = {t.id: t for t in store.trials(store.workloads()[0].id)}
    duplicates = [t for t in trials.values() if t.status == "duplicate"]
    assert duplicates, [(t.config, t.exe_hash[:8]) for t in trials.values()]
    for dup in duplicates:
        original = trials[dup.same_as]
        assert original.status == "ok" and original.exe_hash == dup.exe_hash
        assert dup.median_s == original.median_s and dup.samples is None
