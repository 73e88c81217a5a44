"""A script as users write them, for `xtat profile` tests: `python profiled.py MODE`.

forms: one program reached through each way of getting to jax.jit (plain, decorator, method,
flax.nnx.jit, equinox.filter_jit, Haiku and optax under jax.jit), one with a host callback, one
with donated and static arguments, one function called with two signatures; prints each
program's name and `xtat tune`'s fingerprint of it as JSON.
hot: one matmul chain called many times (most of the script's time).
callback: the same with a host callback in it (jax.pure_callback).
signatures: one function called with two signatures, the smaller far cheaper; an integer input.
fail: runs a program, then exits with status 3.  kill: runs a program, then SIGKILLs itself.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import jax
import jax.numpy as jnp
import numpy as np

X = np.random.default_rng(0).standard_normal((64, 64), dtype=np.float32)
BIG = np.random.default_rng(1).standard_normal((384, 384), dtype=np.float32)  # the hot modes' input: a few ms a call


def chain(x):
    for _ in range(8):
        x = jnp.tanh(x @ x.T * 0.01)
    return x


def keys(jitted, *args, **kwargs) -> str:
    from xtat.capture.workload import Identity

    return Identity.of(jitted.lower(*args, **kwargs)).fingerprint


def forms() -> dict[str, str]:
    import equinox as eqx
    import haiku as hk
    import optax
    from flax import nnx

    found = {}
    plain = jax.jit(lambda x: x * 2 + 1)
    plain(X)
    found["plain"] = keys(plain, X)

    @jax.jit
    def decorated(x):
        return jnp.sin(x).sum()

    decorated(X)
    found["decorator"] = keys(decorated, X)

    class Model:
        def __init__(self):
            self.scale = 3.0
            self.apply = jax.jit(self._apply)

        def _apply(self, x):
            return x * self.scale

    model = Model()
    model.apply(X)
    found["method"] = keys(model.apply, X)

    linear = nnx.Linear(64, 8, rngs=nnx.Rngs(0))

    @nnx.jit
    def nnx_step(m, x):
        return m(x).mean()

    nnx_step(linear, X)
    found["nnx"] = ""  # nnx.jit's own wrapping: recorded, not keyed here

    @eqx.filter_jit
    def eqx_step(x, n):
        return x * n

    eqx_step(X, 4)
    found["equinox"] = ""

    network = hk.without_apply_rng(hk.transform(lambda x: hk.Linear(4)(x)))
    params = network.init(jax.random.PRNGKey(0), X)
    hk_apply = jax.jit(network.apply)
    hk_apply(params, X)
    found["haiku"] = keys(hk_apply, params, X)

    optimizer = optax.adam(1e-3)
    state = optimizer.init(jnp.zeros(3))
    update = jax.jit(optimizer.update)
    update(jnp.ones(3), state)
    found["optax"] = keys(update, jnp.ones(3), state)

    printing = jax.jit(lambda x: (jax.debug.print("sum {s}", s=x.sum()), x + 1)[1])
    printing(X)
    found["callback"] = keys(printing, X)

    donating = jax.jit(lambda x, n: x * n, static_argnums=1, donate_argnums=0)
    donated_input = jnp.asarray(X)
    found["donated"] = keys(donating, donated_input, 5)
    donating(donated_input, 5)

    two = jax.jit(lambda x: (x * x).sum())
    two(X)
    two(X[:32])
    found["two-64"] = keys(two, X)
    found["two-32"] = keys(two, X[:32])
    return found


def main() -> None:
    mode = sys.argv[1]
    if mode == "forms":
        print(json.dumps(forms()))
    elif mode == "hot":
        step = jax.jit(chain)
        x = BIG
        for _ in range(300):
            x = step(x)
        print(float(x.sum()))
    elif mode == "signatures":
        step = jax.jit(lambda x, rows: chain(x)[rows])
        rows = np.arange(3, 8, dtype=np.int32)
        for i in range(400):
            jax.block_until_ready(step(BIG[:96, :96] if i % 4 == 0 else BIG, rows))
    elif mode == "callback":
        step = jax.jit(lambda x: chain(jax.pure_callback(np.tanh, jax.ShapeDtypeStruct(x.shape, x.dtype), x)))
        x = BIG
        for _ in range(300):
            x = step(x)
        print(float(x.sum()))
    else:
        jax.block_until_ready(jax.jit(chain)(X))
        if mode == "fail":
            sys.exit(3)
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
