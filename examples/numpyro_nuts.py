"""NumPyro: a logistic regression sampled with NUTS inside one jittable function.

NumPyro's functional HMC API (`numpyro.infer.hmc.hmc`) gives the NUTS kernel
as plain functions; `sample` runs a chain of them under `lax.scan`, so a whole
block of draws is one program.

    xtat tune examples/numpyro_nuts.py:make --time 600
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer.hmc import hmc
from numpyro.infer.util import initialize_model

import xtat

DRAWS = 10


def model(x, y=None):
    w = numpyro.sample("w", dist.Normal(jnp.zeros(x.shape[1]), 1.0).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    numpyro.sample("y", dist.Bernoulli(logits=x @ w + b), obs=y)


def data(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((200, 8), dtype=np.float32)
    return x, (x @ np.linspace(-1, 1, 8, dtype=np.float32) > 0).astype(np.float32)


X, Y = data()
_INIT, POTENTIAL, _, _ = initialize_model(jax.random.PRNGKey(0), model, model_args=(X, Y), dynamic_args=False)
INIT_KERNEL, SAMPLE_KERNEL = hmc(POTENTIAL, algo="NUTS")


def sample(hmc_state):
    """DRAWS more NUTS draws from hmc_state: the last state and the draws of w."""
    def one(state, _):
        state = SAMPLE_KERNEL(state)
        return state, state.z["w"]

    return jax.lax.scan(one, hmc_state, None, length=DRAWS)


def arguments(seed: int = 0) -> tuple[tuple, dict]:
    state = INIT_KERNEL(_INIT.z, num_warmup=0, step_size=0.1, rng_key=jax.random.PRNGKey(seed))
    return (state,), {}


step = sample
JIT_OPTIONS: dict = {}


def make() -> xtat.Workload:
    args, kwargs = arguments()
    return xtat.Workload(step, args, kwargs, make_inputs=lambda seed: arguments(seed)[0])
