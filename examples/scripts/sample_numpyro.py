"""Sample a Bayesian logistic regression with NumPyro's NUTS, then summarise the posterior, as a
sampling script is usually written.

    xtat profile -- python examples/scripts/sample_numpyro.py --samples 1000
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS


def model(x, y=None):
    w = numpyro.sample("w", dist.Normal(jnp.zeros(x.shape[1]), 1.0).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    numpyro.sample("y", dist.Bernoulli(logits=x @ w + b), obs=y)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "data.npz"
        rng = np.random.default_rng(0)
        x = rng.standard_normal((500, 8)).astype(np.float32)
        np.savez(path, x=x, y=(x @ rng.standard_normal(8) > 0).astype(np.int32))
        data = np.load(path)
        x, y = data["x"], data["y"]
    mcmc = MCMC(NUTS(model), num_warmup=args.warmup, num_samples=args.samples, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0), x, y)
    samples = mcmc.get_samples()
    print("posterior mean of w:", np.round(np.asarray(samples["w"].mean(0)), 3))


if __name__ == "__main__":
    main()
