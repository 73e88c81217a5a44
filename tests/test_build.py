"""Builder: executable identity ignores the options' own bytes, sees code changes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xtat
from tiny import CHUNKS, FAST, mlp, tiny_chunked_mlp, tiny_chunked_nan_max, tiny_mlp, tiny_nan_max
from xtat.build.builder import executable_identity
from xtat.stages.program.knobs import knob_session
from xtat.store.sql import Store
from xtat.xla.protowire import fields, read_varint


def _lowered():
    return jax.jit(lambda w, x: jnp.tanh(x @ w).sum(axis=0)).lower(jnp.ones((64, 64)), jnp.ones((32, 64)))


def _object_files(compiled) -> list[bytes]:
    """The machine code of a CPU executable: the object files of its serialized compilation result."""
    payload = compiled.runtime_executable().serialize()
    length, start = read_varint(payload, 0)
    result = dict(fields(payload[start + length:]))[1]
    return sorted(value for number, value in fields(result) if number == 8)


def test_identity_is_stable_across_compiles_and_irrelevant_options():
    lowered = _lowered()
    default = executable_identity(lowered.compile())
    assert executable_identity(lowered.compile()) == default  # per-compile module ids do not leak in
    assert executable_identity(lowered.compile({"xla_cpu_collective_timeout_seconds": 7})) == default


def test_identity_changes_when_the_code_changes():
    # Another HLO program changes it on any CPU: test_switching_off_the_tree_reduction_rewriter_... below.
    lowered = _lowered()
    default = lowered.compile()
    # Codegen options may change the machine code alone (the HLO text stays), or, on some CPUs,
    # nothing at all (issue 29): the identity follows what this machine built, either way.
    for options in ({"xla_backend_optimization_level": 0}, {"xla_cpu_use_fusion_emitters": False},
                    {"xla_cpu_max_isa": "SSE4_2"}):
        compiled = lowered.compile(options)
        changed = compiled.as_text() != default.as_text() or _object_files(compiled) != _object_files(default)
        assert (executable_identity(compiled) != executable_identity(default)) == changed, options


def spelled(x):
    # Read but not used: every choice traces the same program, so rebuilds the default's executable
    # on any CPU (a codegen option may or may not, depending on the CPU: issue 29).
    xtat.knob("spelling", ("plain", "fancy", "odd"), "plain")
    return jnp.max(x, axis=1), jnp.min(x, axis=0)


def test_identical_executables_reuse_one_measurement(db):
    xtat.tune(xtat.Workload(spelled, tiny_nan_max().args), db=db, budget=3, stages=("program",), **FAST)
    store = Store.open(db, read_only=True)
    trials = {t.id: t for t in store.trials(store.workloads()[0].id)}
    duplicates = [t for t in trials.values() if t.status == "duplicate"]
    assert duplicates, [(t.config, t.exe_hash[:8]) for t in trials.values()]
    for dup in duplicates:
        original = trials[dup.same_as]
        assert original.status == "ok" and original.exe_hash == dup.exe_hash
        assert dup.median_s == original.median_s and dup.samples is None


# -- what other tests build on: executables that differ from the default's on any CPU ------------

@pytest.mark.parametrize("workload", [tiny_chunked_mlp, tiny_chunked_nan_max])
def test_every_chunks_choice_builds_its_own_executable_and_the_same_values(workload):
    """The premise of the sweeps in test_reliability.py and elsewhere (tiny.py, issue 29)."""
    w = workload()
    expected = jax.jit(w.fn)(*w.args)
    identities = set()
    for n in CHUNKS:
        with knob_session({"chunks": n}):
            compiled = jax.jit(lambda *args: w.fn(*args)).lower(*w.args).compile()  # a fresh trace per choice
        identities.add(executable_identity(compiled))
        for got, want in zip(compiled(*w.args), expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert len(identities) == len(CHUNKS)


def test_switching_off_the_tree_reduction_rewriter_changes_the_mlps_program():
    """test_preset.py's config differs from the default by this on any CPU: an HLO pass, not codegen."""
    w, x = tiny_mlp().args
    lowered = jax.jit(mlp).lower(w, x)
    default, without = lowered.compile(), lowered.compile({"xla_disable_hlo_passes": "tree_reduction_rewriter"})
    assert "reduce-window" in default.as_text() and "reduce-window" not in without.as_text()
    assert executable_identity(without) != executable_identity(default)
