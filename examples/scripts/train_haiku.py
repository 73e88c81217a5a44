"""Train a small Haiku transformer language model (`hk.transform`, optax, `jax.jit`), an eval
every few steps.

    xtat profile -- python examples/scripts/train_haiku.py --steps 100
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import haiku as hk
import jax
import numpy as np
import optax

VOCAB, DIM, HEADS, SEQUENCE = 128, 64, 4, 32


def forward(tokens):
    x = hk.Embed(VOCAB, DIM)(tokens)
    for _ in range(2):
        h = hk.LayerNorm(axis=-1, create_scale=True, create_offset=True)(x)
        x = x + hk.MultiHeadAttention(HEADS, DIM // HEADS, w_init=hk.initializers.VarianceScaling(1.0))(h, h, h)
        h = hk.LayerNorm(axis=-1, create_scale=True, create_offset=True)(x)
        x = x + hk.Linear(DIM)(jax.nn.gelu(hk.Linear(4 * DIM)(h)))
    return hk.Linear(VOCAB)(x)


network = hk.without_apply_rng(hk.transform(forward))
optimizer = optax.adamw(1e-3)


def loss_fn(params, tokens):
    logits = network.apply(params, tokens[:, :-1])
    return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()


@jax.jit
def train_step(params, opt_state, tokens):
    loss, grads = jax.value_and_grad(loss_fn)(params, tokens)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


eval_loss = jax.jit(loss_fn)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--eval-every", type=int, default=25)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tokens.npy"
        np.save(path, np.random.default_rng(0).integers(0, VOCAB, (1024, SEQUENCE + 1)).astype(np.int32))
        tokens = np.load(path)
    params = network.init(jax.random.PRNGKey(0), tokens[:1, :-1])
    opt_state = optimizer.init(params)
    for step in range(args.steps):
        i = step % 60
        params, opt_state, loss = train_step(params, opt_state, tokens[i * 16:(i + 1) * 16])
        if (step + 1) % args.eval_every == 0:
            print(f"step {step + 1}: loss {float(loss):.4f}, eval {float(eval_loss(params, tokens[-64:])):.4f}")


if __name__ == "__main__":
    main()
