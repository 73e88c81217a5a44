"""Train an Equinox MLP regressor with `eqx.filter_jit` and optax, an eval every few steps.

    xtat profile -- python examples/scripts/train_equinox.py --steps 300
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax


@eqx.filter_jit
def train_step(model, opt_state, x, y, optimizer):
    def loss_fn(m):
        return jnp.mean((jax.vmap(m)(x) - y) ** 2)

    loss, grads = eqx.filter_value_and_grad(loss_fn)(model)
    updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, loss


@eqx.filter_jit
def evaluate(model, x, y):
    return jnp.mean((jax.vmap(model)(x) - y) ** 2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--eval-every", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "data.npz"
        rng = np.random.default_rng(0)
        x = rng.standard_normal((4096, 32)).astype(np.float32)
        np.savez(path, x=x, y=np.sin(x[:, :4]).astype(np.float32))
        data = np.load(path)
        x, y = data["x"], data["y"]
    model = eqx.nn.MLP(32, 4, 128, 3, key=jax.random.PRNGKey(0))
    optimizer = optax.adam(1e-3)
    opt_state = optimizer.init(eqx.filter(model, eqx.is_array))
    for step in range(args.steps):
        i = step % 32
        model, opt_state, loss = train_step(model, opt_state, x[i * 128:(i + 1) * 128], y[i * 128:(i + 1) * 128],
                                            optimizer)
        if (step + 1) % args.eval_every == 0:
            print(f"step {step + 1}: loss {float(loss):.4f}, eval {float(evaluate(model, x[-1024:], y[-1024:])):.4f}")


if __name__ == "__main__":
    main()
