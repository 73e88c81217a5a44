"""Train a small CNN classifier with Flax Linen, as a training script is usually written: data
made once into a file, a jitted train step and eval step, an eval every few steps.

    python examples/scripts/train_flax_linen.py --steps 200
    xtat profile -- python examples/scripts/train_flax_linen.py --steps 200
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import linen as nn
from flax.training import train_state


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(16, (3, 3))(x))
        x = nn.avg_pool(x, (2, 2), (2, 2))
        x = nn.relu(nn.Conv(32, (3, 3))(x))
        x = x.reshape(x.shape[0], -1)
        return nn.Dense(10)(nn.relu(nn.Dense(64)(x)))


def make_data(path: Path) -> None:
    rng = np.random.default_rng(0)
    images = rng.standard_normal((2048, 16, 16, 1)).astype(np.float32)
    labels = (images.mean(axis=(1, 2, 3)) * 40).astype(np.int32) % 10
    np.savez(path, images=images, labels=labels)


@jax.jit
def train_step(state, images, labels):
    def loss_fn(params):
        logits = state.apply_fn({"params": params}, images)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    return state.apply_gradients(grads=grads), loss


@jax.jit
def eval_step(state, images, labels):
    logits = state.apply_fn({"params": state.params}, images)
    return (logits.argmax(-1) == labels).mean()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "data.npz"
        make_data(path)
        data = np.load(path)
        images, labels = data["images"], data["labels"]
    model = CNN()
    params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 16, 16, 1)))["params"]
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))
    batches = len(images) // args.batch
    for step in range(args.steps):
        i = step % batches
        state, loss = train_step(state, images[i * args.batch:(i + 1) * args.batch],
                                 labels[i * args.batch:(i + 1) * args.batch])
        if (step + 1) % args.eval_every == 0:
            accuracy = eval_step(state, images[-512:], labels[-512:])
            print(f"step {step + 1}: loss {float(loss):.4f}, accuracy {float(accuracy):.3f}")


if __name__ == "__main__":
    main()
