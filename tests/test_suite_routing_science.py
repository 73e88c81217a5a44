"""Suite entries of the routing, HaloNet, Mesh-TF and Bayesian families, on real XLA at the small size.

Every workload is compiled once (module-scoped cache) and shared by the tests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xtat
from tiny import FAST
from xtat.capture.workload import Workload
from xtat.stages.program import discover, rewrite
from xtat.suite import FORMS, bayes, halonet, mesh_transformer, moe
from xtat.suite.routing import DISPATCH_METHODS, queue_slots

# Backend optimization level 0 halves XLA's compile time on CPU; these tests
# check values, not speed.
FAST_COMPILE = {"xla_backend_optimization_level": 0}
ENTRIES = {entry.name: entry for module in (moe, halonet, mesh_transformer, bayes) for entry in module.ENTRIES}
# These check the suite's benchmark models, not the tuner: the default run keeps one form of each
# family that the tests below do not already build, and `pytest -m slow -k finite_and_deterministic`
# runs every one. The MoE steps differ only in their router, which the dispatch test checks.
SLOW_CASES = {("moe-switch", "train"), ("moe-sbase", "train"), ("moe-hash", "train"), ("moe-glam", "train"),
              ("moe-glam", "inference"), ("moe-sbase", "inference"), ("moe-hash", "inference"),
              ("halonet", "train"), ("mesh-transformer", "train"), ("gaussian-mixture", "train")}
CASES = [pytest.param(name, form, marks=pytest.mark.slow) if (name, form) in SLOW_CASES else (name, form)
         for name in ENTRIES for form in FORMS]


@dataclasses.dataclass(frozen=True)
class Compiled:
    workload: Workload
    run: Callable[..., Any]
    outputs: list[np.ndarray]  # flat outputs on the workload's own inputs


@pytest.fixture(scope="module")
def compiled() -> Callable[[str, str], Compiled]:
    cache: dict[tuple[str, str], Compiled] = {}

    def get(name: str, form: str) -> Compiled:
        if (name, form) not in cache:
            workload = ENTRIES[name].workload(form, "small")
            run = _compile(workload.fn, workload.args)
            cache[name, form] = Compiled(workload, run, _flat(run(*workload.args)))
        return cache[name, form]

    return get


def _compile(fn: Callable[..., Any], args: tuple) -> Callable[..., Any]:
    return jax.jit(fn).lower(*args).compile(compiler_options=FAST_COMPILE)


def _flat(tree: Any) -> list[np.ndarray]:
    return [np.asarray(leaf) for leaf in jax.tree.leaves(tree)]


def _signature(tree: Any) -> list[tuple]:
    return [(np.shape(leaf), np.asarray(leaf).dtype) for leaf in jax.tree.leaves(tree)]


def _assert_close(expected: list[np.ndarray], actual: list[np.ndarray], tol: float = 1e-4) -> None:
    assert len(expected) == len(actual)
    for a, b in zip(expected, actual):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_the_entries_are_the_briefs():
    assert set(ENTRIES) == {"moe-glam", "moe-switch", "moe-hash", "moe-sbase", "halonet", "mesh-transformer",
                            "hmc-logistic", "nuts-logistic", "eight-schools", "gaussian-mixture"}


@pytest.mark.parametrize("name,form", CASES)
def test_small_workload_runs_finite_and_deterministic(compiled, name, form):
    entry = compiled(name, form)
    assert entry.outputs and all(np.all(np.isfinite(out)) for out in entry.outputs)
    _assert_close(entry.outputs, _flat(entry.run(*entry.workload.args)), tol=0)  # same inputs, same outputs

    fresh = entry.workload.make_inputs(1)
    assert _signature(fresh) == _signature(entry.workload.args)
    _assert_close(_flat(entry.workload.make_inputs(0)), _flat(entry.workload.args), tol=0)
    outputs = _flat(entry.run(*fresh))
    assert all(np.all(np.isfinite(out)) for out in outputs)
    # Seed 1 is other data (or other chains), so the outputs move.
    assert any(not np.array_equal(a, b) for a, b in zip(entry.outputs, outputs))


# --------------------------------------------------------------------------- knobs


def _tiny_moe_layer(router) -> tuple[moe.MoEFeedForward, Any, np.ndarray, np.ndarray]:
    # Capacity factor 0.5 in two groups of 16 tokens: choices overflow and are dropped.
    cfg = dataclasses.replace(moe.SIZES["small"], d_model=16, ff_dim=32, num_experts=4, batch=2, seq_len=16,
                              group_size=16, capacity_factor=0.5, router=router)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((cfg.batch, cfg.seq_len, cfg.d_model)).astype(np.float32)
    ids = rng.integers(0, cfg.vocab, (cfg.batch, cfg.seq_len)).astype(np.int32)
    layer = moe.MoEFeedForward(cfg)
    params = layer.init(jax.random.key(0), x, ids)
    return layer, params, x, ids


# One router in the default run (its Switch layer drops tokens too); every one with `pytest -m slow`.
@pytest.mark.parametrize("variant", [v if v == "moe-switch" else pytest.param(v, marks=pytest.mark.slow)
                                     for v in moe.ROUTERS])
def test_moe_dispatch_methods_agree_in_outputs_and_gradients(variant):
    layer, params, x, ids = _tiny_moe_layer(moe.ROUTERS[variant])
    probe = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)

    def step(params, x, ids):
        def objective(params, x):
            y, aux = layer.apply(params, x, ids)
            return jnp.sum(y * probe) + aux, y
        return jax.value_and_grad(objective, argnums=(0, 1), has_aux=True)(params, x)

    knobs = [d for d in discover(step, (params, x, ids)) if d.id == "knob:moe_dispatch"]
    assert [(d.values, d.default) for d in knobs] == [(DISPATCH_METHODS, "einsum")]
    args = (params, x, ids)
    results = {method: _flat(_compile(rewrite(step, {"knob:moe_dispatch": method}), args)(*args))
               for method in DISPATCH_METHODS}
    for method in DISPATCH_METHODS[1:]:
        _assert_close(results["einsum"], results[method], tol=1e-5)

    # The comparison covers dropped choices: some overflow their expert.
    groups = x.reshape(-1, layer.config.tokens_per_group, layer.config.d_model)
    logits = groups @ params["params"]["router"]["kernel"] if layer.config.router.learned else None
    routes = layer.config.router.route(logits, ids.reshape(groups.shape[:2]), layer.config.num_experts)
    assert int(jnp.max(queue_slots(routes.expert_index, layer.config.num_experts))) >= layer.config.expert_capacity


def test_moe_dispatch_knob_reaches_the_suite_model(compiled):
    entry = compiled("moe-switch", "inference")
    args = entry.workload.args
    by_sort = _compile(rewrite(entry.workload.fn, {"knob:moe_dispatch": "sort"}), args)
    _assert_close(entry.outputs, _flat(by_sort(*args)))


def test_halo_extractions_agree(compiled):
    entry = compiled("halonet", "inference")  # the default: pad_slice
    for method in ("unfold", "masked_dense"):
        args = entry.workload.args
        run = _compile(rewrite(entry.workload.fn, {"knob:halo_extraction": method}), args)
        _assert_close(entry.outputs, _flat(run(*args)))


def test_halo_windows_are_the_padded_neighbourhoods():
    x = np.arange(2 * 16 * 16 * 3, dtype=np.float32).reshape(2, 16, 16, 3)
    block, halo = 4, 1
    padded = np.pad(x, ((0, 0), (halo, halo), (halo, halo), (0, 0)))
    window = block + 2 * halo
    expected = np.stack([np.stack([padded[:, i * block:i * block + window, j * block:j * block + window]
                                   for j in range(4)], axis=1) for i in range(4)], axis=1)
    for extract in (halonet.halos_pad_slice, halonet.halos_unfold):
        np.testing.assert_array_equal(np.asarray(extract(jnp.asarray(x), block, halo)), expected)


# --------------------------------------------------------------------------- named dimensions


def test_mesh_transformer_names_every_dimension(compiled):
    assert mesh_transformer.einsum_spec((("batch", "length", "d_model"), ("d_model", "d_ff")),
                                        ("batch", "length", "d_ff")) == "bld,df->blf"
    names = mesh_transformer.parameter_dimensions("small")
    params = compiled("mesh-transformer", "inference").workload.args[0]["params"]
    assert jax.tree.structure(names, is_leaf=lambda n: isinstance(n, tuple)) == jax.tree.structure(params)
    sizes = mesh_transformer.SMALL.sizes
    for dims, value in zip(jax.tree.leaves(names, is_leaf=lambda n: isinstance(n, tuple)), jax.tree.leaves(params)):
        assert set(dims) <= set(mesh_transformer.DIMENSIONS) and sizes(dims) == value.shape
    assert names["decoder_0"]["cross_attn"]["q"] == ("d_model", "heads", "d_kv")
    with pytest.raises(ValueError, match="dimensions"):
        mesh_transformer.named_einsum(("batch",), (jnp.ones((2, 3)), ("batch",)))


# --------------------------------------------------------------------------- Bayesian


def test_nuts_chains_depend_only_on_their_own_keys(compiled):
    entry = compiled("nuts-logistic", "train")
    positions, data, keys = entry.workload.args
    draws, acceptance, leapfrog_steps = (np.asarray(out) for out in entry.run(positions, data, keys))
    assert len(set(leapfrog_steps.tolist())) > 1  # trajectory lengths differ from chain to chain
    # The chains in the other order: each chain's trajectory follows its key.
    swapped = entry.run(positions[::-1], data, keys[::-1])
    np.testing.assert_array_equal(np.asarray(swapped[2]), leapfrog_steps[::-1])
    np.testing.assert_allclose(np.asarray(swapped[0]), draws[::-1], rtol=1e-5, atol=1e-5)
    assert np.all(acceptance > 0.5)


def test_eight_schools_chains_mix(compiled):
    entry = compiled("eight-schools", "train")
    draws, acceptance, _ = entry.run(*entry.workload.args)
    mu = np.asarray(draws["mu"])[:, 50:]  # [chains, transitions] after burn-in
    assert np.all(np.asarray(acceptance) > 0.6)
    assert 0.0 < mu.mean() < 10.0  # the posterior mean of mu is about 4.4


def test_hmc_logistic_keeps_its_behaviour(compiled):
    assert bayes.hmc_logistic("small").name == "hmc_logistic"
    samples, acceptance = compiled("hmc-logistic", "train").outputs  # the same chain, as a suite entry
    assert samples.shape == (200, 8) and 0.5 < float(acceptance) <= 1.0


# --------------------------------------------------------------------------- end to end


def test_tune_a_small_inference_entry(db):
    options = ("xla_cpu_opt_preset", "xla_backend_optimization_level", "xla_cpu_prefer_vector_width")
    result = xtat.tune(ENTRIES["eight-schools"].workload("inference"), db=db, budget=3, options=options,
                       stages=("codegen",), **FAST)
    assert result.new_trials == 3 and sum(result.trials.values()) == 3
    assert result.workload == "eight-schools/inference"
    assert result.default_ci_ms[0] <= result.default_ms <= result.default_ci_ms[1]
