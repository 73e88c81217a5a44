"""Sample text from a small decoder with a key/value cache, as a sampling script is usually
written: the decode function made inside `main()`, many batches decoded, a statistic of the
tokens computed beside it.

    xtat profile -- python examples/scripts/decode_kv_cache.py --batches 200
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

VOCAB, DIM, HEADS, LAYERS, LENGTH = 256, 64, 4, 2, 32


def init_params(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)

    def dense(*shape):
        return jnp.asarray(rng.standard_normal(shape, dtype=np.float32) / np.sqrt(shape[0]))

    layers = [{"qkv": dense(DIM, 3 * DIM), "out": dense(DIM, DIM), "up": dense(DIM, 4 * DIM),
               "down": dense(4 * DIM, DIM)} for _ in range(LAYERS)]
    return {"embed": dense(VOCAB, DIM), "layers": layers}


def norm(x):
    return (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-6)


def layer_step(layer, x, cache_k, cache_v, position):
    batch = x.shape[0]
    q, k, v = jnp.split(norm(x) @ layer["qkv"], 3, axis=-1)
    q, k, v = (t.reshape(batch, HEADS, DIM // HEADS) for t in (q, k, v))
    cache_k = jax.lax.dynamic_update_slice(cache_k, k[:, None], (0, position, 0, 0))
    cache_v = jax.lax.dynamic_update_slice(cache_v, v[:, None], (0, position, 0, 0))
    scores = jnp.einsum("bhd,bthd->bht", q, cache_k) / np.sqrt(DIM // HEADS)
    scores = jnp.where(jnp.arange(LENGTH)[None, None] <= position, scores, -1e9)
    attended = jnp.einsum("bht,bthd->bhd", jax.nn.softmax(scores, -1), cache_v).reshape(batch, DIM)
    x = x + attended @ layer["out"]
    return x + jax.nn.gelu(norm(x) @ layer["up"]) @ layer["down"], cache_k, cache_v


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=200)
    args = parser.parse_args()
    params = init_params()

    @jax.jit
    def decode(params, prompt):
        batch = prompt.shape[0]
        cache = jnp.zeros((LAYERS, 2, batch, LENGTH, HEADS, DIM // HEADS))
        tokens = jnp.zeros((batch, LENGTH), jnp.int32).at[:, 0].set(prompt)

        def body(carry):
            position, tokens, cache = carry
            x = params["embed"][tokens[:, position]]
            new_cache = []
            for i, layer in enumerate(params["layers"]):
                x, k, v = layer_step(layer, x, cache[i, 0], cache[i, 1], position)
                new_cache.append(jnp.stack([k, v]))
            logits = norm(x) @ params["embed"].T
            tokens = tokens.at[:, position + 1].set(jnp.argmax(logits, -1).astype(jnp.int32))
            return position + 1, tokens, jnp.stack(new_cache)

        return jax.lax.while_loop(lambda c: c[0] < LENGTH - 1, body, (0, tokens, cache))[1]

    distinct = jax.jit(lambda t: jnp.mean(jnp.sum(jax.nn.one_hot(t, VOCAB).max(axis=1), axis=-1)))
    rng = np.random.default_rng(0)
    seen = []
    for _ in range(args.batches):
        tokens = decode(params, rng.integers(0, VOCAB, 8).astype(np.int32))
        seen.append(distinct(tokens))
    print(f"{args.batches} batches decoded; distinct tokens per row {float(np.mean(seen)):.2f}")


if __name__ == "__main__":
    main()
