"""Bayesian inference in the style of BayesSuite: HMC on logistic regression, plain JAX.

A chain of Hamiltonian Monte Carlo transitions, each `leapfrog_steps` leapfrog
steps in an inner `scan`, the transitions in an outer `scan`: a loop-heavy
program with small tensors, where loop unrolling and thread count matter more
than matmul speed. The momenta and the Metropolis uniforms are inputs (drawn
by a seeded numpy generator in `make_inputs`), so the program holds no RNG
and `make_inputs(seed)` gives a genuinely different chain.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from xtat.workload import Workload


@dataclass(frozen=True)
class HMCSize:
    observations: int
    features: int
    transitions: int
    leapfrog_steps: int
    step_size: float = 0.05


SIZES = {"small": HMCSize(64, 8, 200, 8), "large": HMCSize(4096, 64, 2000, 16)}


def _size(size: str) -> HMCSize:
    if size not in SIZES:
        raise ValueError(f"unknown HMC workload size {size!r}; valid sizes: {', '.join(SIZES)}")
    return SIZES[size]


def _log_density(beta: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
    """Logistic regression with a standard normal prior on the weights."""
    logits = x @ beta
    return jnp.sum(y * logits - jnp.logaddexp(0.0, logits)) - 0.5 * jnp.sum(beta**2)


def make_hmc_chain(config: HMCSize):
    grad = jax.grad(_log_density)

    def chain(beta0, x, y, momenta, uniforms):
        def leapfrog(state, _):
            beta, p = state
            p = p + 0.5 * config.step_size * grad(beta, x, y)
            beta = beta + config.step_size * p
            p = p + 0.5 * config.step_size * grad(beta, x, y)
            return (beta, p), None

        def transition(beta, inputs):
            p0, u = inputs
            (proposal, p1), _ = jax.lax.scan(leapfrog, (beta, p0), None, length=config.leapfrog_steps)
            current = _log_density(beta, x, y) - 0.5 * jnp.sum(p0**2)
            proposed = _log_density(proposal, x, y) - 0.5 * jnp.sum(p1**2)
            accept = jnp.log(u) < proposed - current
            beta = jnp.where(accept, proposal, beta)
            return beta, (beta, accept)

        _, (samples, accepted) = jax.lax.scan(transition, beta0, (momenta, uniforms))
        return samples, jnp.mean(accepted.astype(jnp.float32))

    return chain


def _inputs(config: HMCSize, seed: int) -> tuple:
    data = np.random.default_rng(1234)  # the data set is fixed; the chain's randomness varies
    x = data.standard_normal((config.observations, config.features)).astype(np.float32)
    true_beta = data.standard_normal(config.features).astype(np.float32)
    y = (data.random(config.observations) < 1 / (1 + np.exp(-x @ true_beta))).astype(np.float32)
    rng = np.random.default_rng(seed)
    momenta = rng.standard_normal((config.transitions, config.features)).astype(np.float32)
    uniforms = rng.random(config.transitions).astype(np.float32)
    beta0 = np.zeros(config.features, np.float32)
    return beta0, x, y, momenta, uniforms


def hmc_logistic(size: str = "small") -> Workload:
    """HMC chain on Bayesian logistic regression (200 transitions x 8 leapfrog steps when small)."""
    config = _size(size)
    return Workload(make_hmc_chain(config), _inputs(config, 0), name="hmc_logistic",
                    make_inputs=lambda seed: _inputs(config, seed))
