"""BlackJAX: NUTS on a correlated Gaussian, a block of steps under `lax.scan`, with a typed key.

    xtat tune examples/blackjax_sampler.py:make --time 600
"""

from __future__ import annotations

import blackjax
import jax
import jax.numpy as jnp
import numpy as np

import xtat

DIM, DRAWS = 16, 20
_A = np.random.default_rng(0).standard_normal((DIM, DIM), dtype=np.float32)
PRECISION = jnp.asarray(_A @ _A.T / DIM + np.eye(DIM, dtype=np.float32))


def logdensity(x):
    return -0.5 * x @ PRECISION @ x


NUTS = blackjax.nuts(logdensity, step_size=0.3, inverse_mass_matrix=jnp.ones(DIM))


def sample(state, key):
    """DRAWS NUTS steps: the last state and the positions drawn."""
    def one(state, step_key):
        state, _ = NUTS.step(step_key, state)
        return state, state.position

    return jax.lax.scan(one, state, jax.random.split(key, DRAWS))


def arguments(seed: int = 0) -> tuple[tuple, dict]:
    return (NUTS.init(jnp.zeros(DIM)), jax.random.key(seed)), {}


step = sample
JIT_OPTIONS: dict = {}


def make() -> xtat.Workload:
    args, kwargs = arguments()
    return xtat.Workload(step, args, kwargs, make_inputs=lambda seed: arguments(seed)[0])
