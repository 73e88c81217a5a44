"""Train an MLP with Flax NNX in its in-place style (`nnx.jit` updates the model and optimizer
where they are), with an eval every few steps.

    xtat profile -- python examples/scripts/train_flax_nnx.py --steps 300
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import optax
from flax import nnx


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(64, 256, rngs=rngs)
        self.out = nnx.Linear(256, 10, rngs=rngs)

    def __call__(self, x):
        return self.out(nnx.gelu(self.hidden(x)))


def loss_fn(model, x, y):
    return optax.softmax_cross_entropy_with_integer_labels(model(x), y).mean()


@nnx.jit
def train_step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
    optimizer.update(model, grads)
    return loss


@nnx.jit
def eval_step(model, x, y):
    return (model(x).argmax(-1) == y).mean()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--eval-every", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "data.npz"
        rng = np.random.default_rng(0)
        x = rng.standard_normal((4096, 64)).astype(np.float32)
        np.savez(path, x=x, y=(x[:, :10].argmax(-1)).astype(np.int32))
        data = np.load(path)
        x, y = data["x"], data["y"]
    model = MLP(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    for step in range(args.steps):
        i = step % 32
        loss = train_step(model, optimizer, x[i * 128:(i + 1) * 128], y[i * 128:(i + 1) * 128])
        if (step + 1) % args.eval_every == 0:
            accuracy = eval_step(model, x[-1024:], y[-1024:])
            print(f"step {step + 1}: loss {float(loss):.4f}, accuracy {float(accuracy):.3f}")


if __name__ == "__main__":
    main()
