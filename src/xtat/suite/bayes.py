"""Bayesian inference in the style of BayesSuite: posterior sampling and prediction.

Loop-heavy programs with small tensors, where loop unrolling and thread count
matter more than matmul speed. Four suite entries, each in two forms:

    hmc-logistic      plain-JAX HMC on logistic regression (`hmc_logistic`):
                      transitions in an outer `scan`, leapfrog steps in an inner one
    nuts-logistic     BlackJAX NUTS on a wider logistic regression, chains in `vmap`
    eight-schools     the non-centred eight-schools model, BlackJAX HMC, chains in `vmap`
    gaussian-mixture  a 2-D mixture of Gaussians (means, scales, weights), BlackJAX HMC

"train" is the sampling step: a fixed number of transitions of every chain
from a given state. The randomness is an input (raw PRNG key data per chain;
for hmc-logistic the momenta and Metropolis uniforms themselves), so the
program holds no RNG state, its outputs are a function of its inputs (NUTS
trajectory lengths included), and `make_inputs(seed)` gives other chains.

"inference" is posterior predictive evaluation: the log pointwise predictive
density of new data, log (1/S) sum_s p(y_new | theta_s), over S posterior
draws. The draws are fixed inputs (the "parameters"), drawn near the
data-generating values so that building the workload needs no sampling run;
`make_inputs(seed)` draws new data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import blackjax
import jax
import jax.numpy as jnp
import numpy as np

from xtat.capture.workload import Workload
from xtat.suite import SuiteEntry

PyTree = Any
Data = tuple  # a model's observed data, passed to the programs as inputs


# --------------------------------------------------------------------------- hmc-logistic, plain JAX


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


def make_hmc_chain(config: HMCSize) -> Callable:
    grad = jax.grad(_log_density)

    def chain(beta0: jax.Array, x: jax.Array, y: jax.Array, momenta: jax.Array, uniforms: jax.Array) -> Any:
        def leapfrog(state: tuple[jax.Array, jax.Array], _: None) -> tuple[tuple[jax.Array, jax.Array], None]:
            beta, p = state
            p = p + 0.5 * config.step_size * grad(beta, x, y)
            beta = beta + config.step_size * p
            p = p + 0.5 * config.step_size * grad(beta, x, y)
            return (beta, p), None

        def transition(beta: jax.Array, inputs: tuple[jax.Array, jax.Array]) -> Any:
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


def _data_set(config: HMCSize) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, y, the weights that generated y): fixed, the same for every seed."""
    data = np.random.default_rng(1234)
    x = data.standard_normal((config.observations, config.features)).astype(np.float32)
    true_beta = data.standard_normal(config.features).astype(np.float32)
    y = (data.random(config.observations) < 1 / (1 + np.exp(-x @ true_beta))).astype(np.float32)
    return x, y, true_beta


def _inputs(config: HMCSize, seed: int) -> tuple:
    x, y, _ = _data_set(config)  # the data set is fixed; the chain's randomness varies
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


# --------------------------------------------------------------------------- models
#
# Each model: a log density of unconstrained parameters given its data (for
# the samplers), and a pointwise log likelihood of new data (for prediction).


def _logistic_log_likelihood(beta: jax.Array, data: Data) -> jax.Array:
    x, y = data
    logits = x @ beta
    return y * logits - jnp.logaddexp(0.0, logits)  # [N]


def _logistic_log_density(beta: jax.Array, data: Data) -> jax.Array:
    return jnp.sum(_logistic_log_likelihood(beta, data)) - 0.5 * jnp.sum(beta**2)


def _logistic_data(rng: np.random.Generator, true_beta: np.ndarray, observations: int) -> Data:
    x = rng.standard_normal((observations, true_beta.size)).astype(np.float32)
    y = (rng.random(observations) < 1 / (1 + np.exp(-x @ true_beta))).astype(np.float32)
    return x, y


# Rubin (1981): estimated coaching effects and their standard errors.
EIGHT_SCHOOLS_Y = np.array([28, 8, -3, 7, -1, 1, 18, 12], np.float32)
EIGHT_SCHOOLS_SIGMA = np.array([15, 10, 16, 11, 9, 11, 10, 18], np.float32)


def _normal_logpdf(x: jax.Array, mean: jax.Array | float, scale: jax.Array | float) -> jax.Array:
    return -0.5 * ((x - mean) / scale) ** 2 - jnp.log(scale) - 0.5 * math.log(2 * math.pi)


def _school_effects(draw: Mapping[str, jax.Array]) -> jax.Array:
    """Non-centred: theta_j = mu + tau * theta_tilde_j, so the sampler never sees the funnel."""
    return draw["mu"] + jnp.exp(draw["log_tau"]) * draw["theta_tilde"]


def _eight_schools_log_likelihood(draw: Mapping[str, jax.Array], data: Data) -> jax.Array:
    y, sigma = data  # y: [..., J] (several replicated studies at prediction time)
    return _normal_logpdf(y, _school_effects(draw), sigma)


def _eight_schools_log_density(draw: Mapping[str, jax.Array], data: Data) -> jax.Array:
    # mu ~ N(0, 5), tau ~ HalfCauchy(5) sampled as log tau (+ log tau: the
    # Jacobian), theta_tilde ~ N(0, 1), y_j ~ N(theta_j, sigma_j).
    tau = jnp.exp(draw["log_tau"])
    log_prior = (_normal_logpdf(draw["mu"], 0.0, 5.0) - jnp.log1p((tau / 5.0) ** 2) + draw["log_tau"]
                 + jnp.sum(_normal_logpdf(draw["theta_tilde"], 0.0, 1.0)))
    return log_prior + jnp.sum(_eight_schools_log_likelihood(draw, data))


def _mixture_log_likelihood(draw: Mapping[str, jax.Array], data: Data) -> jax.Array:
    """Isotropic Gaussian components: log sum_k w_k N(x | mean_k, scale_k^2 I), per point."""
    (points,) = data  # [N, D]
    scales = jnp.exp(draw["log_scales"])  # [K]
    squared = jnp.sum((points[:, None, :] - draw["means"][None]) ** 2, axis=-1)  # [N, K]
    dims = points.shape[-1]
    component = -0.5 * squared / scales**2 - dims * (jnp.log(scales) + 0.5 * math.log(2 * math.pi))
    return jax.nn.logsumexp(jax.nn.log_softmax(draw["weight_logits"]) + component, axis=-1)


def _mixture_log_density(draw: Mapping[str, jax.Array], data: Data) -> jax.Array:
    # means ~ N(0, 5), log scales ~ N(0, 1), weight logits ~ N(0, 1).
    log_prior = (jnp.sum(_normal_logpdf(draw["means"], 0.0, 5.0))
                 + jnp.sum(_normal_logpdf(draw["log_scales"], 0.0, 1.0))
                 + jnp.sum(_normal_logpdf(draw["weight_logits"], 0.0, 1.0)))
    return log_prior + jnp.sum(_mixture_log_likelihood(draw, data))


def _mixture_truth(components: int, dims: int) -> dict[str, np.ndarray]:
    """Fixed, well separated components with unequal weights and scales."""
    rng = np.random.default_rng(1234)
    return {"means": rng.uniform(-6, 6, (components, dims)).astype(np.float32),
            "log_scales": rng.uniform(-0.5, 0.3, components).astype(np.float32),
            "weight_logits": rng.normal(0.0, 0.5, components).astype(np.float32)}


def _mixture_points(rng: np.random.Generator, truth: Mapping[str, np.ndarray], count: int) -> np.ndarray:
    weights = np.exp(truth["weight_logits"]) / np.sum(np.exp(truth["weight_logits"]))
    labels = rng.choice(weights.size, size=count, p=weights)
    noise = rng.standard_normal((count, truth["means"].shape[1]))
    return (truth["means"][labels] + noise * np.exp(truth["log_scales"])[labels, None]).astype(np.float32)


# --------------------------------------------------------------------------- the two forms


def chain_keys(seed: int, chains: int) -> np.ndarray:
    """Raw threefry key data, one key per chain, [chains, 2] uint32 (any bits are a valid key)."""
    return np.random.default_rng(seed).integers(0, 2**32, size=(chains, 2), dtype=np.uint32)


def sampling_step(algorithm: Callable[[Data], blackjax.base.SamplingAlgorithm], transitions: int) -> Callable:
    """(positions [C, ...], data, key data [C, 2]) -> (draws [C, T, ...], mean acceptance [C],
    leapfrog steps taken [C]): `transitions` steps of every chain, chains in `vmap`."""

    def sample(positions: PyTree, data: Data, key_data: jax.Array) -> Any:
        kernel = algorithm(data)

        def one_chain(position: PyTree, key_bits: jax.Array) -> Any:
            keys = jax.random.split(jax.random.wrap_key_data(key_bits), transitions)

            def transition(state: Any, key: jax.Array) -> Any:
                state, info = kernel.step(key, state)
                return state, (state.position, info.acceptance_rate, info.num_integration_steps)

            _, (draws, acceptance, steps) = jax.lax.scan(transition, kernel.init(position), keys)
            return draws, jnp.mean(acceptance), jnp.sum(steps)

        return jax.vmap(one_chain)(positions, key_data)

    return sample


def predictive_step(log_likelihood: Callable[[PyTree, Data], jax.Array]) -> Callable:
    """(draws [S, ...], new data) -> log pointwise predictive density of every new point."""

    def predict(draws: PyTree, new_data: Data) -> jax.Array:
        per_draw = jax.vmap(log_likelihood, in_axes=(0, None))(draws, new_data)  # [S, ...]
        return jax.nn.logsumexp(per_draw, axis=0) - math.log(per_draw.shape[0])

    return predict


@dataclass(frozen=True)
class SamplerSize:
    """Chains and transitions of the sampling step; draws and new points of prediction."""

    chains: int
    transitions: int
    step_size: float
    draws: int  # posterior draws the predictive step averages over
    new_points: int  # observations (or replicated studies) of new data
    observations: int = 0  # data set size, where the model has one
    features: int = 0  # logistic regression: weights
    components: int = 0  # mixture: Gaussian components
    integration_steps: int = 0  # HMC leapfrog steps per transition
    max_doublings: int = 0  # NUTS: bound on the trajectory length, 2^d - 1 steps


def _chooser(sizes: Mapping[str, SamplerSize]) -> Callable[[str], SamplerSize]:
    def size_of(size: str) -> SamplerSize:
        if size not in sizes:
            raise ValueError(f"unknown Bayesian workload size {size!r}; valid sizes: {', '.join(sizes)}")
        return sizes[size]

    return size_of


def _logistic_draws(true_beta: np.ndarray, draws: int) -> np.ndarray:
    return (true_beta + 0.2 * np.random.default_rng(7).standard_normal((draws, true_beta.size))).astype(np.float32)


def _hmc_logistic_inference(size: str) -> Workload:
    config = _size(size)
    _, _, true_beta = _data_set(config)
    new_points = config.observations
    draws = _logistic_draws(true_beta, config.transitions)  # as many draws as the chain makes

    def make_inputs(seed: int) -> tuple:
        return draws, _logistic_data(np.random.default_rng(seed), true_beta, new_points)

    return Workload(predictive_step(_logistic_log_likelihood), make_inputs(0), name="hmc-logistic/inference",
                    make_inputs=make_inputs)


NUTS_LOGISTIC = _chooser({
    "small": SamplerSize(chains=4, transitions=50, step_size=0.1, draws=400, new_points=256,
                         observations=128, features=16, max_doublings=5),
    "large": SamplerSize(chains=16, transitions=500, step_size=0.02, draws=8000, new_points=16384,
                         observations=4096, features=64, max_doublings=8),
})


def _nuts_logistic_setup(size: SamplerSize) -> tuple[np.ndarray, Data]:
    true_beta = np.random.default_rng(1234).standard_normal(size.features).astype(np.float32)
    return true_beta, _logistic_data(np.random.default_rng(1235), true_beta, size.observations)


def _nuts_logistic_train(size_name: str) -> Workload:
    size = NUTS_LOGISTIC(size_name)
    _, data = _nuts_logistic_setup(size)

    def algorithm(data: Data) -> blackjax.base.SamplingAlgorithm:
        return blackjax.nuts(lambda beta: _logistic_log_density(beta, data), size.step_size,
                             jnp.ones(size.features), max_num_doublings=size.max_doublings)

    positions = np.zeros((size.chains, size.features), np.float32)

    def make_inputs(seed: int) -> tuple:
        return positions, data, chain_keys(seed, size.chains)

    return Workload(sampling_step(algorithm, size.transitions), make_inputs(0), name="nuts-logistic/train",
                    make_inputs=make_inputs)


def _nuts_logistic_inference(size_name: str) -> Workload:
    size = NUTS_LOGISTIC(size_name)
    true_beta, _ = _nuts_logistic_setup(size)
    draws = _logistic_draws(true_beta, size.draws)

    def make_inputs(seed: int) -> tuple:
        return draws, _logistic_data(np.random.default_rng(seed), true_beta, size.new_points)

    return Workload(predictive_step(_logistic_log_likelihood), make_inputs(0), name="nuts-logistic/inference",
                    make_inputs=make_inputs)


EIGHT_SCHOOLS = _chooser({
    "small": SamplerSize(chains=4, transitions=200, step_size=0.4, integration_steps=8, draws=1000, new_points=64),
    "large": SamplerSize(chains=1024, transitions=2000, step_size=0.4, integration_steps=16, draws=16000,
                         new_points=4096),
})


def _eight_schools_train(size_name: str) -> Workload:
    size = EIGHT_SCHOOLS(size_name)

    def algorithm(data: Data) -> blackjax.base.SamplingAlgorithm:
        return blackjax.hmc(lambda draw: _eight_schools_log_density(draw, data), size.step_size,
                            jnp.ones(EIGHT_SCHOOLS_Y.size + 2), size.integration_steps)

    # Overdispersed starting points, the same for every seed: the state the step starts from.
    start = np.random.default_rng(0)
    positions = {"mu": start.normal(0.0, 5.0, size.chains).astype(np.float32),
                 "log_tau": start.normal(0.0, 1.0, size.chains).astype(np.float32),
                 "theta_tilde": start.normal(0.0, 1.0, (size.chains, EIGHT_SCHOOLS_Y.size)).astype(np.float32)}

    def make_inputs(seed: int) -> tuple:
        return positions, (EIGHT_SCHOOLS_Y, EIGHT_SCHOOLS_SIGMA), chain_keys(seed, size.chains)

    return Workload(sampling_step(algorithm, size.transitions), make_inputs(0), name="eight-schools/train",
                    make_inputs=make_inputs)


def _eight_schools_inference(size_name: str) -> Workload:
    size = EIGHT_SCHOOLS(size_name)
    # Near the posterior: mu about 4.4 (sd 3.3), tau mostly below 10.
    rng = np.random.default_rng(7)
    draws = {"mu": rng.normal(4.4, 3.3, size.draws).astype(np.float32),
             "log_tau": rng.normal(1.0, 0.8, size.draws).astype(np.float32),
             "theta_tilde": rng.normal(0.0, 1.0, (size.draws, EIGHT_SCHOOLS_Y.size)).astype(np.float32)}

    def make_inputs(seed: int) -> tuple:
        # Replicated studies: new effect estimates of the same schools, same standard errors.
        rng = np.random.default_rng(seed)
        effects = rng.normal(8.0, 6.0, (size.new_points, EIGHT_SCHOOLS_Y.size))
        studies = (effects + rng.standard_normal(effects.shape) * EIGHT_SCHOOLS_SIGMA).astype(np.float32)
        return draws, (studies, EIGHT_SCHOOLS_SIGMA)

    return Workload(predictive_step(_eight_schools_log_likelihood), make_inputs(0),
                    name="eight-schools/inference", make_inputs=make_inputs)


GAUSSIAN_MIXTURE = _chooser({
    "small": SamplerSize(chains=4, transitions=100, step_size=0.01, integration_steps=8, draws=500,
                         new_points=512, observations=256, components=3),
    "large": SamplerSize(chains=64, transitions=1000, step_size=0.002, integration_steps=16, draws=8000,
                         new_points=16384, observations=16384, components=8),
})
MIXTURE_DIMS = 2


def _gaussian_mixture_train(size_name: str) -> Workload:
    size = GAUSSIAN_MIXTURE(size_name)
    truth = _mixture_truth(size.components, MIXTURE_DIMS)
    points = _mixture_points(np.random.default_rng(1235), truth, size.observations)
    parameters = size.components * (MIXTURE_DIMS + 2)

    def algorithm(data: Data) -> blackjax.base.SamplingAlgorithm:
        return blackjax.hmc(lambda draw: _mixture_log_density(draw, data), size.step_size,
                            jnp.ones(parameters), size.integration_steps)

    # Every chain starts with its means on data points picked at random, unit scales, equal weights.
    start = np.random.default_rng(0)
    positions = {"means": points[start.choice(size.observations, (size.chains, size.components))],
                 "log_scales": np.zeros((size.chains, size.components), np.float32),
                 "weight_logits": np.zeros((size.chains, size.components), np.float32)}

    def make_inputs(seed: int) -> tuple:
        return positions, (points,), chain_keys(seed, size.chains)

    return Workload(sampling_step(algorithm, size.transitions), make_inputs(0), name="gaussian-mixture/train",
                    make_inputs=make_inputs)


def _gaussian_mixture_inference(size_name: str) -> Workload:
    size = GAUSSIAN_MIXTURE(size_name)
    truth = _mixture_truth(size.components, MIXTURE_DIMS)
    rng = np.random.default_rng(7)
    draws = {name: (value + 0.05 * rng.standard_normal((size.draws, *value.shape))).astype(np.float32)
             for name, value in truth.items()}

    def make_inputs(seed: int) -> tuple:
        return draws, (_mixture_points(np.random.default_rng(seed), truth, size.new_points),)

    return Workload(predictive_step(_mixture_log_likelihood), make_inputs(0), name="gaussian-mixture/inference",
                    make_inputs=make_inputs)


_FAMILY = "Bayesian inference"
ENTRIES = [
    SuiteEntry("hmc-logistic", _FAMILY,
               "plain-JAX HMC on logistic regression, leapfrog scan in a transition scan; "
               "small: 64 x 8 data, 200 transitions x 8 leapfrog steps; predictive over 200 draws",
               hmc_logistic, _hmc_logistic_inference),
    SuiteEntry("nuts-logistic", _FAMILY,
               "BlackJAX NUTS on logistic regression, chains in vmap; "
               "small: 128 x 16 data, 4 chains x 50 transitions, at most 31 leapfrog steps each",
               _nuts_logistic_train, _nuts_logistic_inference),
    SuiteEntry("eight-schools", _FAMILY,
               "non-centred eight-schools hierarchical model, BlackJAX HMC, chains in vmap; "
               "small: 4 chains x 200 transitions x 8 leapfrog steps; predictive over 1000 draws",
               _eight_schools_train, _eight_schools_inference),
    SuiteEntry("gaussian-mixture", _FAMILY,
               "2-D mixture of Gaussians (means, scales, weights), BlackJAX HMC, chains in vmap; "
               "small: 256 points, 3 components, 4 chains x 100 transitions x 8 leapfrog steps",
               _gaussian_mixture_train, _gaussian_mixture_inference),
]
