"""Greedy decoding with a key/value cache in a `while_loop`, as Flax's lm1b example decodes:
one token per iteration, each attending over the cache written so far.

Plain JAX, so the program is all there is to tune. Runtime decisions (CPUs, host devices)
found for it are confirmed in a process started with them; deploy those with
`xtat run -- python your_script.py`, as the tuner says when it adopts one.

    xtat tune examples/kv_cache_decoder.py:make --time 600
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import xtat

VOCAB, DIM, HEADS, LAYERS, LENGTH = 256, 64, 4, 2, 32


def init_params(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)

    def dense(*shape):
        return jnp.asarray(rng.standard_normal(shape, dtype=np.float32) / np.sqrt(shape[0]))

    layers = [{"qkv": dense(DIM, 3 * DIM), "out": dense(DIM, DIM), "up": dense(DIM, 4 * DIM),
               "down": dense(4 * DIM, DIM)} for _ in range(LAYERS)]
    return {"embed": dense(VOCAB, DIM), "layers": layers}


def _norm(x):
    return (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-6)


def _layer(layer, x, cache_k, cache_v, position):
    """One token through one layer; writes its key and value at `position` of the cache."""
    batch = x.shape[0]
    q, k, v = jnp.split(_norm(x) @ layer["qkv"], 3, axis=-1)
    q, k, v = (t.reshape(batch, HEADS, DIM // HEADS) for t in (q, k, v))
    cache_k = jax.lax.dynamic_update_slice(cache_k, k[:, None], (0, position, 0, 0))
    cache_v = jax.lax.dynamic_update_slice(cache_v, v[:, None], (0, position, 0, 0))
    scores = jnp.einsum("bhd,bthd->bht", q, cache_k) / np.sqrt(DIM // HEADS)
    scores = jnp.where(jnp.arange(LENGTH)[None, None] <= position, scores, -1e9)
    attended = jnp.einsum("bht,bthd->bhd", jax.nn.softmax(scores, -1), cache_v).reshape(batch, DIM)
    x = x + attended @ layer["out"]
    return x + jax.nn.gelu(_norm(x) @ layer["up"]) @ layer["down"], cache_k, cache_v


def decode(params, prompt):
    """Greedy decoding of LENGTH tokens after each row's one-token prompt."""
    batch = prompt.shape[0]
    cache = jnp.zeros((LAYERS, 2, batch, LENGTH, HEADS, DIM // HEADS))
    tokens = jnp.zeros((batch, LENGTH), jnp.int32).at[:, 0].set(prompt)

    def body(carry):
        position, tokens, cache = carry
        x = params["embed"][tokens[:, position]]
        new_cache = []
        for i, layer in enumerate(params["layers"]):
            x, k, v = _layer(layer, x, cache[i, 0], cache[i, 1], position)
            new_cache.append(jnp.stack([k, v]))
        logits = _norm(x) @ params["embed"].T
        tokens = tokens.at[:, position + 1].set(jnp.argmax(logits, -1).astype(jnp.int32))
        return position + 1, tokens, jnp.stack(new_cache)

    _, tokens, _ = jax.lax.while_loop(lambda c: c[0] < LENGTH - 1, body, (0, tokens, cache))
    return tokens


def arguments(seed: int = 0) -> tuple[tuple, dict]:
    prompt = np.random.default_rng(seed).integers(0, VOCAB, 8).astype(np.int32)
    return (init_params(), prompt), {}


step = decode
JIT_OPTIONS: dict = {}


def make() -> xtat.Workload:
    args, kwargs = arguments()
    return xtat.Workload(step, args, kwargs, make_inputs=lambda seed: arguments(seed)[0])
