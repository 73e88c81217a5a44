"""The examples gallery: each program, written in its library's own style, is tuned at a small
budget (real XLA, real workers) and then called through `xtat.jit`, whose output must be
jax.jit's (or, for an equinox.filter_jit step, filter_jit's)."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

import xtat
from tiny import FAST
from xtat.apply.lookup import Found
from xtat.capture.arguments import unwrap_jit
from xtat.capture.targets import load_target

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
GALLERY = sorted(path.stem for path in EXAMPLES.glob("*.py"))
OPTIONS = ("xla_cpu_prefer_vector_width",)
QUICK = {**FAST, "confirm_looks": 1}  # the test is of tuning and deploying the program, not of confirmation


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"gallery_{name}", EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reference(example):
    step = example.step
    return step if unwrap_jit(step).filtered else jax.jit(step, **example.JIT_OPTIONS)


def test_the_gallery_has_every_style_the_readme_lists():
    assert set(GALLERY) >= {"flax_linen_train_state", "flax_nnx", "equinox_filter_jit", "haiku_transformer",
                            "numpyro_nuts", "blackjax_sampler", "optax_loop", "debug_print", "kv_cache_decoder",
                            "sharded_mlp"}


# The heaviest builds (10-30 s each on 2 cores) run with `pytest -m slow`; the default run keeps the
# others, and `tests/test_profile.py` traces Haiku's and Flax's ways of reaching jax.jit.
SLOW_EXAMPLES = {"haiku_transformer", "numpyro_nuts", "flax_linen_train_state", "blackjax_sampler"}


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW_EXAMPLES else name
                                  for name in GALLERY])
def test_an_example_is_tuned_and_deployed_through_xtat_jit(db, name):
    example = _module(name)
    workload = load_target(f"{EXAMPLES / name}.py:make")
    assert workload.display_name == f"{name}:make"
    result = xtat.tune(workload, db=db, budget=2, options=OPTIONS, stages=("codegen",), **QUICK)
    # The default and one config were built and verified in workers, and timed unless the config
    # rebuilds the default's executable (whether a codegen option changes anything depends on the CPU).
    assert set(result.trials) <= {"ok", "duplicate"} and sum(result.trials.values()) == 2, result.trials
    args, kwargs = example.arguments()
    tuned = xtat.jit(example.step, db=db, **example.JIT_OPTIONS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # found, vetted and applied without a word
        out = tuned(*args, **kwargs)
    expected = _reference(example)(*args, **kwargs)
    assert [lookup.found for lookup in tuned.lookups()] in ([Found.ADOPTED], [Found.NOT_ADOPTED])
    out_leaves, expected_leaves = jax.tree.leaves(out), jax.tree.leaves(expected)
    assert jax.tree.structure(out) == jax.tree.structure(expected)
    for got, want in zip(out_leaves, expected_leaves):
        if not hasattr(want, "dtype"):  # a non-array leaf of an equinox.filter_jit output (a function)
            assert got is want
            continue
        if jax.dtypes.issubdtype(want.dtype, jax.dtypes.prng_key):
            got, want = jax.random.key_data(got), jax.random.key_data(want)
        if result.adopted:  # another executable: within the verified tolerance
            np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                                       rtol=2e-3, atol=2e-3)
        else:  # XLA's defaults: the very same program
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
